import { ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LAUNCHING, TERMINATING } from '../../local-cloud/autoscaling/simulator.js';
import { type LocalCloud, startLocalCloud } from '../../local-cloud/cloud.js';
import { SdkAutoScaling } from '../../shared/autoscaling/sdk-autoscaling.js';
import { controlPlaneConfigToEnv } from '../../shared/config/control-plane.js';
import { LAUNCH_DETAIL_TYPE, STATE_CHANGE_DETAIL_TYPE, TERMINATE_DETAIL_TYPE } from '../../shared/lifecycle/events.js';
import { SqsRequeue } from '../../shared/queue/requeue.js';
import { eventually } from './support/cloud.js';

/**
 * The deployed entry point itself (lambdas/instance-lifecycle/handler.ts), configured only through its
 * environment as the CDK construct configures it, behind the local cloud's event source mapping.
 */
describe('Lambda entry point: instance-lifecycle handler', () => {
  let cloud: LocalCloud;
  const saved = { ...process.env };
  let queueUrl = '';

  beforeAll(async () => {
    cloud = await startLocalCloud({ timeScale: 0.01, leaseTable: 'entry-table', seedNetwork: true });
    const { queue } = cloud.createQueueWithDlq('lifecycle', { visibilityTimeoutS: 900 });
    queueUrl = queue.url();
    cloud.putRule(
      'hooks',
      { source: ['aws.autoscaling'], 'detail-type': [LAUNCH_DETAIL_TYPE, TERMINATE_DETAIL_TYPE] },
      [queue],
    );
    cloud.putRule('ec2', { source: ['aws.ec2'], 'detail-type': [STATE_CHANGE_DETAIL_TYPE] }, [queue]);
    Object.assign(
      process.env,
      cloud.env,
      controlPlaneConfigToEnv({ tableName: 'entry-table', clusterName: 'entry', logLevel: 'error' }),
      {
        VPC_LEASE_QUEUE_URL: queueUrl,
      },
    );
    const { handler } = await import('../../lambdas/instance-lifecycle/handler.js');
    cloud.createEventSourceMapping(queue, handler, { reportBatchItemFailures: true, functionTimeoutS: 150 });
  });
  afterAll(async () => {
    await cloud.close();
    for (const key of Object.keys(process.env)) if (!(key in saved)) delete process.env[key];
  });

  it('takes a node from launch hook to InService and from scale-in to GONE', async () => {
    cloud.autoScaling.simulator.createGroup({
      name: 'entry',
      minSize: 0,
      maxSize: 2,
      desiredCapacity: 1,
      instanceTypes: ['t3.medium'],
      subnetIds: [cloud.network!.subnetIds[0]!],
      hooks: [
        { name: 'launch', transition: LAUNCHING, heartbeatTimeoutS: 7200, defaultResult: 'ABANDON' },
        { name: 'terminate', transition: TERMINATING, heartbeatTimeoutS: 7200, defaultResult: 'CONTINUE' },
      ],
    });
    const id = await eventually('InService', () => {
      const [i] = cloud.autoScaling.simulator.getGroup('entry')?.instances.values() ?? [];
      return i?.lifecycleState === 'InService' && i.instanceId;
    });
    const interfaces = cloud.ec2.api.instanceInterfaces(id);
    expect(interfaces.map((i) => i.deviceIndex)).toEqual([0, 1, 2]);
    expect(interfaces.slice(1).every((i) => i.deleteOnTermination && i.privateIpAddresses.length === 6)).toBe(true);

    cloud.autoScaling.simulator.setDesiredCapacity('entry', 0);
    await eventually('terminated with no pod ENI left', () => cloud.ec2.api.getInstance(id)?.state === 'terminated');
    await eventually('no ENI left', () => cloud.ec2.api.instanceInterfaces(id).length === 0);
  });

  it('maps a completed or unknown lifecycle action to gone, through the real Auto Scaling client', async () => {
    const asg = new SdkAutoScaling({ clientConfig: { region: cloud.region } });
    const ref = {
      autoScalingGroupName: 'entry',
      hookName: 'launch',
      token: 'no-such-token',
      instanceId: 'i-0123456789abcdef0',
    };
    await expect(asg.completeLifecycleAction(ref, 'CONTINUE')).resolves.toBe('gone');
    await expect(asg.recordLifecycleActionHeartbeat(ref)).resolves.toBe('gone');
  });

  it('re-enqueues with DelaySeconds through the real SQS client', async () => {
    const other = cloud.createQueue('requeue-probe');
    const requeue = new SqsRequeue(other.url(), { clientConfig: { region: cloud.region } });
    // 300 simulated seconds: 3 s of real time at this cloud's scale.
    await requeue.requeue('{"probe":1}', 300);
    const sqs = new SQSClient({ region: cloud.region });
    const first = await sqs.send(new ReceiveMessageCommand({ QueueUrl: other.url(), WaitTimeSeconds: 0 }));
    expect(first.Messages ?? []).toHaveLength(0);
    const later = await eventually('delayed message visible', async () => {
      const out = await sqs.send(new ReceiveMessageCommand({ QueueUrl: other.url(), WaitTimeSeconds: 0 }));
      return out.Messages?.length ? out.Messages : undefined;
    });
    expect(later[0]?.Body).toBe('{"probe":1}');
    sqs.destroy();
  });
});
