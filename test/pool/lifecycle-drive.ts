import { randomUUID } from 'node:crypto';
import type { AutoScalingPort, LifecycleResult } from '../../shared/autoscaling/port.js';
import type { LifecycleDeps } from '../../shared/lifecycle/deps.js';
import { createLifecycleRecordHandler } from '../../shared/lifecycle/record-handler.js';
import { ACCOUNT, type PoolEnv, REGION } from './support.js';

/** A lifecycle hook's EventBridge event as the queue delivers it. */
export function lifecycleBody(detailType: string, transition: string, instanceId: string): string {
  return JSON.stringify({
    version: '0',
    id: randomUUID(),
    'detail-type': detailType,
    source: 'aws.autoscaling',
    account: ACCOUNT,
    time: new Date().toISOString(),
    region: REGION,
    resources: [`arn:aws:autoscaling:${REGION}:${ACCOUNT}:autoScalingGroup:${randomUUID()}:autoScalingGroupName/nodes`],
    detail: {
      LifecycleActionToken: randomUUID(),
      AutoScalingGroupName: 'nodes',
      LifecycleHookName: 'vpc-lease',
      EC2InstanceId: instanceId,
      LifecycleTransition: transition,
      Origin: 'EC2',
      Destination: 'AutoScalingGroup',
    },
  });
}

/** Runs one lifecycle event and everything it re-enqueues until it settles (SQS delays skipped). */
export async function drive(e: PoolEnv, body: string, results: LifecycleResult[]): Promise<void> {
  const queued: string[] = [body];
  const autoScaling: AutoScalingPort = {
    completeLifecycleAction: async (_ref, result) => {
      results.push(result);
      return 'done';
    },
    recordLifecycleActionHeartbeat: async () => 'done',
  };
  const deps: LifecycleDeps = {
    ec2: e.ec2,
    store: e.store,
    autoScaling,
    requeue: { requeue: async (next) => void queued.push(next) },
    config: e.config,
    clock: e.clock,
    logger: e.logger,
    metrics: e.metrics,
    random: () => 0.5,
  };
  const handle = createLifecycleRecordHandler(deps);
  for (let i = 0; queued.length > 0; i++) {
    if (i > 60) throw new Error('lifecycle event never settled');
    await handle(queued.shift()!);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
