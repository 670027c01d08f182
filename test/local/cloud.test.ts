import {
  AutoScalingClient,
  CompleteLifecycleActionCommand,
  CreateAutoScalingGroupCommand,
  DescribeAutoScalingGroupsCommand,
} from '@aws-sdk/client-auto-scaling';
import { DescribeTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DescribeSubnetsCommand, EC2Client } from '@aws-sdk/client-ec2';
import { GetQueueUrlCommand, ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { SQSEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalCloud } from '../../local-cloud/cloud.js';
import { startLocalCloud } from '../../local-cloud/cloud.js';
import type { BusEvent, InstanceStateChangeDetail, LifecycleActionDetail } from '../../local-cloud/events/event.js';
import { CLAIMABLE_INDEX } from '../../shared/lease-store/table.js';
import { eventually } from './helpers.js';

describe('startLocalCloud', () => {
  let cloud: LocalCloud;
  const savedEnv = { ...process.env };
  const clients: { destroy(): void }[] = [];
  const client = <T extends { destroy(): void }>(c: T): T => {
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    cloud = await startLocalCloud({ timeScale: 0.02, leaseTable: 'leases', seedNetwork: true, seed: 9 });
    // Clients get no endpoint: they must find every service through the standard environment variables.
    Object.assign(process.env, cloud.env);
  });
  afterAll(async () => {
    for (const c of clients) c.destroy();
    process.env = savedEnv;
    await cloud.close();
  });

  it('points unmodified SDK clients at every service through AWS_ENDPOINT_URL_<SERVICE>', async () => {
    expect(Object.keys(cloud.env)).toEqual(
      expect.arrayContaining([
        'AWS_ENDPOINT_URL_EC2',
        'AWS_ENDPOINT_URL_AUTO_SCALING',
        'AWS_ENDPOINT_URL_SQS',
        'AWS_ENDPOINT_URL_DYNAMODB',
        'AWS_REGION',
        'AWS_ACCESS_KEY_ID',
        'AWS_SECRET_ACCESS_KEY',
      ]),
    );
    const subnets = await client(new EC2Client({})).send(new DescribeSubnetsCommand({}));
    expect(subnets.Subnets?.map((s) => s.SubnetId).sort()).toEqual([...cloud.network!.subnetIds].sort());
    const table = await client(new DynamoDBClient({})).send(new DescribeTableCommand({ TableName: 'leases' }));
    expect(table.Table?.TableStatus).toBe('ACTIVE');
    expect(table.Table?.LocalSecondaryIndexes?.map((i) => i.IndexName)).toEqual([CLAIMABLE_INDEX.name]);
    const groups = await client(new AutoScalingClient({})).send(new DescribeAutoScalingGroupsCommand({}));
    expect(groups.AutoScalingGroups).toEqual([]);
    cloud.createQueue('probe');
    const url = await client(new SQSClient({})).send(new GetQueueUrlCommand({ QueueName: 'probe' }));
    expect(url.QueueUrl).toBe(`${cloud.endpoints.sqs}/${cloud.accountId}/probe`);
  });

  it('runs the production path: lifecycle event → rule → queue → handler → CompleteLifecycleAction → InService', async () => {
    // Visibility above the function timeout (900 s by default): a slow handler on a loaded machine is not retried.
    const { queue, dlq } = cloud.createQueueWithDlq('lifecycle', { maxReceiveCount: 3, visibilityTimeoutS: 5400 });
    const stateChanges = cloud.createQueue('state-changes');
    cloud.putRule('asg-lifecycle', { source: ['aws.autoscaling'], 'detail-type': [{ prefix: 'EC2 Instance-' }] }, [
      queue,
    ]);
    cloud.putRule('ec2-state', { source: ['aws.ec2'], 'detail-type': ['EC2 Instance State-change Notification'] }, [
      stateChanges,
    ]);
    const autoscaling = client(new AutoScalingClient({}));
    const seenIdentity: string[] = [];
    // A stand-in for lambdas/instance-lifecycle: reads the node's IMDS like the CNI would, then completes.
    const mapping = cloud.createEventSourceMapping(queue, async (event: SQSEvent) => {
      for (const record of event.Records) {
        const lifecycle = JSON.parse(record.body) as BusEvent<LifecycleActionDetail>;
        const base = await cloud.imds.endpointFor(lifecycle.detail.EC2InstanceId);
        const token = await (
          await fetch(`${base}/latest/api/token`, {
            method: 'PUT',
            headers: { 'X-aws-ec2-metadata-token-ttl-seconds': '21600' },
          })
        ).text();
        const doc = await fetch(`${base}/latest/dynamic/instance-identity/document`, {
          headers: { 'X-aws-ec2-metadata-token': token },
        });
        seenIdentity.push(((await doc.json()) as { instanceId: string }).instanceId);
        await autoscaling.send(
          new CompleteLifecycleActionCommand({
            AutoScalingGroupName: lifecycle.detail.AutoScalingGroupName,
            LifecycleHookName: lifecycle.detail.LifecycleHookName,
            LifecycleActionToken: lifecycle.detail.LifecycleActionToken,
            LifecycleActionResult: 'CONTINUE',
          }),
        );
      }
    });
    await autoscaling.send(
      new CreateAutoScalingGroupCommand({
        AutoScalingGroupName: 'nodes',
        MinSize: 0,
        MaxSize: 3,
        DesiredCapacity: 2,
        VPCZoneIdentifier: cloud.network!.subnetIds.join(','),
        LaunchTemplate: { LaunchTemplateName: 'nodes' },
        LifecycleHookSpecificationList: [
          {
            LifecycleHookName: 'launch',
            LifecycleTransition: 'autoscaling:EC2_INSTANCE_LAUNCHING',
            HeartbeatTimeout: 7200,
          },
        ],
      }),
    );
    const instances = await eventually(
      async () => {
        const out = await autoscaling.send(new DescribeAutoScalingGroupsCommand({ AutoScalingGroupNames: ['nodes'] }));
        const list = out.AutoScalingGroups?.[0]?.Instances ?? [];
        return list.length === 2 && list.every((i) => i.LifecycleState === 'InService') ? list : undefined;
      },
      { what: 'both instances InService' },
    );
    expect(new Set(seenIdentity)).toEqual(new Set(instances.map((i) => i.InstanceId)));
    // InService can precede the handler's return (and so the delete): wait for the mapping to settle.
    await eventually(() => mapping.stats().recordsDeleted === 2, { what: 'both records deleted' });
    expect(mapping.stats()).toMatchObject({ failedInvocations: 0, staleDeletes: 0 });
    expect(dlq.counts()).toEqual({ visible: 0, inFlight: 0, delayed: 0 });
    // EC2 state changes of both instances reached their queue through the real SQS protocol.
    const sqs = client(new SQSClient({}));
    const url = (await sqs.send(new GetQueueUrlCommand({ QueueName: 'state-changes' }))).QueueUrl!;
    const states = new Map<string, string[]>();
    await eventually(
      async () => {
        const got = await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10 }));
        for (const m of got.Messages ?? []) {
          const e = JSON.parse(m.Body!) as BusEvent<InstanceStateChangeDetail>;
          states.set(e.detail['instance-id'], [...(states.get(e.detail['instance-id']) ?? []), e.detail.state]);
        }
        return [...states.values()].filter((s) => s.includes('running')).length === 2;
      },
      { what: 'running state changes' },
    );
    for (const instance of instances) expect(states.get(instance.InstanceId!)).toEqual(['pending', 'running']);
  });
});
