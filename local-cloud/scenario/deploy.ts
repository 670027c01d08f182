import { randomUUID } from 'node:crypto';
import type { ScheduledEvent } from 'aws-lambda';
import { QUEUE_URL_ENV } from '../../lambdas/instance-lifecycle/deps.js';
import { handler as lifecycleHandler } from '../../lambdas/instance-lifecycle/handler.js';
import { handler as poolHandler } from '../../lambdas/pool-manager/handler.js';
import { handler as reconcilerHandler } from '../../lambdas/reconciler/handler.js';
import { type ControlPlaneConfig, controlPlaneConfigToEnv } from '../../shared/config/control-plane.js';
import { LAUNCH_DETAIL_TYPE, STATE_CHANGE_DETAIL_TYPE, TERMINATE_DETAIL_TYPE } from '../../shared/lifecycle/events.js';
import type { ReconcileReport } from '../../shared/reconcile/reconciler.js';
import type { LocalCloud } from '../cloud.js';
import { HOOKLESS_LAUNCH_PATTERN } from '../events/lifecycle-rules.js';
import type { EventSourceMapping } from '../sqs/event-source-mapping.js';
import type { Queue } from '../sqs/queue.js';

/**
 * The control plane "deployed" on the local cloud the way the CDK construct (infra/construct/allocator.ts)
 * deploys it in AWS: one event queue with a DLQ (5 receives, visibility 6 × the 40 s function timeout),
 * EventBridge rules for the lifecycle hooks and for terminated instances, an SQS event source mapping
 * (batch 10, partial batch failures) into the unmodified lifecycle handler, and the pool-manager and
 * reconciler handlers on schedules (1 and 5 minutes, scaled like the rest of the cloud). The handlers read
 * their configuration from the same VPC_LEASE_* variables the construct writes and find the simulators
 * through AWS_ENDPOINT_URL_*, so this file wires; it decides nothing.
 *
 * DynamoDB streams are not modelled by dynalite: the pool-manager runs on its schedule (and on demand),
 * not on every claim as in AWS.
 */
export const LIFECYCLE_TIMEOUT_S = 40;
export const MAX_RECEIVE_COUNT = 5;
export const POOL_INTERVAL_S = 60;
export const RECONCILE_INTERVAL_S = 300;
export const LAUNCH_HOOK = 'vpc-lease-launch';
export const TERMINATE_HOOK = 'vpc-lease-terminate';

export interface DeployOptions {
  readonly config: Partial<ControlPlaneConfig>;
  /**
   * Which functions run on their (scaled) schedules from the start; default both. Tests that step by step, and
   * the scenario (its reconcile is a step of its own), start them later with `startSchedule`.
   */
  readonly schedules?: readonly ScheduledFunction[];
  /** The construct's `hooklessLaunches`: EC2 pending/running state changes into the queue too. */
  readonly hooklessLaunches?: boolean;
  /** Called when a scheduled invocation throws (it is retried next period, as EventBridge would). */
  readonly onScheduleError?: (fn: ScheduledFunction, err: unknown) => void;
}

export type ScheduledFunction = 'pool-manager' | 'reconciler';

export interface Deployment {
  readonly queue: Queue;
  readonly dlq: Queue;
  readonly mapping: EventSourceMapping;
  readonly env: Readonly<Record<string, string>>;
  readonly config: Partial<ControlPlaneConfig>;
  /** One pool-manager invocation with the schedule's event (what EventBridge sends every minute). */
  invokePoolManager(): Promise<unknown>;
  invokeReconciler(): Promise<ReconcileReport>;
  /** Starts a function's schedule (once; a second call does nothing). */
  startSchedule(fn: ScheduledFunction): void;
  /** Stops the schedules and the event source mapping (the cloud itself is closed by its owner). */
  stop(): Promise<void>;
}

function scheduledEvent(cloud: LocalCloud, rule: string): ScheduledEvent {
  return {
    version: '0',
    id: randomUUID(),
    'detail-type': 'Scheduled Event',
    source: 'aws.events',
    account: cloud.accountId,
    time: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'),
    region: cloud.region,
    resources: [`arn:${cloud.partition}:events:${cloud.region}:${cloud.accountId}:rule/${rule}`],
    detail: {},
  };
}

/**
 * Deploys into `cloud` and points this process's environment at it (the handlers read `process.env` on their
 * first invocation and keep what they built, as a Lambda container does: one deployment per process).
 */
export function deployControlPlane(cloud: LocalCloud, options: DeployOptions): Deployment {
  const { queue, dlq } = cloud.createQueueWithDlq('vpc-lease-events', {
    maxReceiveCount: MAX_RECEIVE_COUNT,
    visibilityTimeoutS: LIFECYCLE_TIMEOUT_S * 6,
  });
  cloud.putRule(
    'vpc-lease-lifecycle-hooks',
    {
      source: ['aws.autoscaling'],
      'detail-type': [LAUNCH_DETAIL_TYPE, TERMINATE_DETAIL_TYPE],
      detail: { LifecycleHookName: [LAUNCH_HOOK, TERMINATE_HOOK] },
    },
    [queue],
  );
  cloud.putRule(
    'vpc-lease-instance-terminated',
    { source: ['aws.ec2'], 'detail-type': [STATE_CHANGE_DETAIL_TYPE], detail: { state: ['terminated'] } },
    [queue],
  );
  if (options.hooklessLaunches) cloud.putRule('vpc-lease-launch-states', HOOKLESS_LAUNCH_PATTERN, [queue]);
  const env: Record<string, string> = {
    ...cloud.env,
    ...controlPlaneConfigToEnv(options.config),
    [QUEUE_URL_ENV]: queue.url(),
  };
  Object.assign(process.env, env);

  const mapping = cloud.createEventSourceMapping(queue, (event) => lifecycleHandler(event), {
    batchSize: 10,
    reportBatchItemFailures: true,
    maximumConcurrency: 20,
    functionTimeoutS: LIFECYCLE_TIMEOUT_S,
    // The scaled clock makes the function timeout outlast the visibility timeout only here; AWS refuses that, so
    // a slow invocation on a loaded machine must not see its records delivered again meanwhile.
    holdWhileRunning: true,
  });

  // EventBridge schedules invoke asynchronously and never overlap with themselves here: a run still going
  // when the next tick comes is skipped (a Lambda would run them concurrently; the handlers are safe either
  // way, the machine is small).
  const timers: NodeJS.Timeout[] = [];
  const running = new Set<Promise<unknown>>();
  const started = new Set<ScheduledFunction>();
  const schedule = (name: ScheduledFunction, periodS: number, run: () => Promise<unknown>): void => {
    if (started.has(name)) return;
    started.add(name);
    let busy = false;
    const timer = setInterval(
      () => {
        if (busy) return;
        busy = true;
        const p = run()
          .catch((err: unknown) => options.onScheduleError?.(name, err))
          .finally(() => {
            busy = false;
            running.delete(p);
          });
        running.add(p);
      },
      Math.max(50, cloud.scheduler.realMs(periodS * 1000)),
    );
    timer.unref();
    timers.push(timer);
  };
  const invokePoolManager = (): Promise<unknown> => poolHandler(scheduledEvent(cloud, 'vpc-lease-pool-schedule'));
  const invokeReconciler = (): Promise<ReconcileReport> => reconcilerHandler();
  const startSchedule = (fn: ScheduledFunction): void =>
    fn === 'pool-manager'
      ? schedule(fn, POOL_INTERVAL_S, invokePoolManager)
      : schedule(fn, RECONCILE_INTERVAL_S, invokeReconciler);
  for (const fn of options.schedules ?? ['pool-manager', 'reconciler']) startSchedule(fn);
  return {
    queue,
    dlq,
    mapping,
    env,
    config: options.config,
    invokePoolManager,
    invokeReconciler,
    startSchedule,
    stop: async () => {
      for (const t of timers.splice(0)) clearInterval(t);
      await mapping.stop();
      await Promise.allSettled([...running]);
    },
  };
}
