import {
  AutoScalingClient,
  CompleteLifecycleActionCommand,
  CreateAutoScalingGroupCommand,
  DeleteAutoScalingGroupCommand,
  DescribeAutoScalingGroupsCommand,
  DescribeAutoScalingInstancesCommand,
  DescribeLifecycleHooksCommand,
  PutLifecycleHookCommand,
  RecordLifecycleActionHeartbeatCommand,
  SetDesiredCapacityCommand,
  TerminateInstanceInAutoScalingGroupCommand,
} from '@aws-sdk/client-auto-scaling';
import { CreateLaunchTemplateCommand, DescribeInstancesCommand, EC2Client } from '@aws-sdk/client-ec2';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AutoScalingSimulatorHandle } from '../../infra/local/autoscaling/index.js';
import { startAutoScalingSimulator } from '../../infra/local/autoscaling/index.js';
import type { Ec2SimulatorServer } from '../../infra/local/ec2/index.js';
import { startEc2Simulator } from '../../infra/local/ec2/index.js';
import { EventBus } from '../../infra/local/events/bus.js';
import type { BusEvent, LifecycleActionDetail } from '../../infra/local/events/event.js';
import type { SimScheduler } from '../../infra/local/events/scheduler.js';
import { createScheduler } from '../../infra/local/events/scheduler.js';
import { queueTarget } from '../../infra/local/events/targets.js';
import { SqsEngine } from '../../infra/local/sqs/engine.js';
import type { Queue } from '../../infra/local/sqs/queue.js';
import { ACCOUNT, eventually, LOCAL_CREDENTIALS, REGION, sleepMs } from './helpers.js';

// 1 simulated second = 20 real ms: a 30 s hook times out after 0.6 s, EC2's 15 s boot takes 0.3 s.
const TIME_SCALE = 0.02;
const LAUNCHING = 'autoscaling:EC2_INSTANCE_LAUNCHING';
const TERMINATING = 'autoscaling:EC2_INSTANCE_TERMINATING';

describe('Auto Scaling simulator over the Query protocol', () => {
  let scheduler: SimScheduler;
  let ec2Sim: Ec2SimulatorServer;
  let asg: AutoScalingSimulatorHandle;
  let client: AutoScalingClient;
  let ec2: EC2Client;
  let bus: EventBus;
  let engine: SqsEngine;
  let subnetA: string;
  let subnetB: string;
  let n = 0;

  beforeAll(async () => {
    scheduler = createScheduler({ timeScale: TIME_SCALE });
    ec2Sim = await startEc2Simulator({ timeScale: TIME_SCALE, region: REGION, accountId: ACCOUNT, seed: 7 });
    const vpc = ec2Sim.admin.seedVpc('10.0.0.0/16');
    subnetA = ec2Sim.admin.seedSubnet(vpc.vpcId, '10.0.1.0/24', 'us-east-1a').subnetId;
    subnetB = ec2Sim.admin.seedSubnet(vpc.vpcId, '10.0.2.0/24', 'us-east-1b').subnetId;
    bus = new EventBus();
    engine = new SqsEngine({ scheduler, region: REGION, accountId: ACCOUNT });
    asg = await startAutoScalingSimulator({ ec2: ec2Sim.api, scheduler, emit: (e) => bus.put(e) });
    client = new AutoScalingClient({
      endpoint: asg.endpoint,
      region: REGION,
      credentials: LOCAL_CREDENTIALS,
      maxAttempts: 1,
    });
    ec2 = new EC2Client({ endpoint: ec2Sim.endpoint, region: REGION, credentials: LOCAL_CREDENTIALS, maxAttempts: 1 });
  });
  afterEach(() => {
    for (const rule of bus.listRules()) bus.deleteRule(rule.name);
  });
  afterAll(async () => {
    client.destroy();
    ec2.destroy();
    await asg.close();
    engine.close();
    await ec2Sim.close();
    scheduler.close();
  });

  /** A group whose lifecycle events land in a fresh queue. */
  const group = async (
    hooks: { name: string; transition: string; timeoutS?: number; defaultResult?: string; metadata?: string }[],
    desired: number,
    max = 4,
  ): Promise<{ name: string; queue: Queue }> => {
    n += 1;
    const name = `asg-${n}`;
    const queue = engine.createQueue(`events-${n}`);
    bus.putRule({
      name: `rule-${n}`,
      eventPattern: { source: ['aws.autoscaling'], detail: { AutoScalingGroupName: [name] } },
      targets: [queueTarget(queue)],
    });
    await client.send(
      new CreateAutoScalingGroupCommand({
        AutoScalingGroupName: name,
        MinSize: 0,
        MaxSize: max,
        DesiredCapacity: desired,
        VPCZoneIdentifier: `${subnetA},${subnetB}`,
        MixedInstancesPolicy: {
          LaunchTemplate: {
            LaunchTemplateSpecification: { LaunchTemplateName: 'nodes', Version: '$Latest' },
            Overrides: [{ InstanceType: 'm5.large' }],
          },
        },
        Tags: [{ Key: 'cluster', Value: 'c1', PropagateAtLaunch: true }],
        LifecycleHookSpecificationList: hooks.map((h) => ({
          LifecycleHookName: h.name,
          LifecycleTransition: h.transition,
          HeartbeatTimeout: h.timeoutS ?? 7200,
          DefaultResult: h.defaultResult ?? 'ABANDON',
          ...(h.metadata ? { NotificationMetadata: h.metadata } : {}),
        })),
      }),
    );
    return { name, queue };
  };

  const describeGroup = async (name: string) =>
    (await client.send(new DescribeAutoScalingGroupsCommand({ AutoScalingGroupNames: [name] }))).AutoScalingGroups![0]!;

  const nextEvents = async (queue: Queue, count: number): Promise<BusEvent<LifecycleActionDetail>[]> => {
    const out: BusEvent<LifecycleActionDetail>[] = [];
    await eventually(
      async () => {
        for (const m of await queue.receive({ maxMessages: 10 })) {
          out.push(JSON.parse(m.body) as BusEvent<LifecycleActionDetail>);
          queue.delete(m.receiptHandle);
        }
        return out.length >= count;
      },
      { what: `${count} lifecycle events` },
    );
    return out;
  };

  const ec2State = async (instanceId: string): Promise<string | undefined> => {
    const out = await ec2.send(new DescribeInstancesCommand({ InstanceIds: [instanceId] }));
    return out.Reservations?.[0]?.Instances?.[0]?.State?.Name;
  };

  it('launches through EC2 into Pending:Wait and emits the launch lifecycle event exactly as AWS documents', async () => {
    const { name, queue } = await group([{ name: 'launch', transition: LAUNCHING, metadata: 'meta' }], 2);
    const described = await describeGroup(name);
    expect(described.DesiredCapacity).toBe(2);
    expect(described.Instances).toHaveLength(2);
    expect(described.Instances!.map((i) => i.LifecycleState)).toEqual(['Pending:Wait', 'Pending:Wait']);
    // Spread over both subnets' zones.
    expect(new Set(described.Instances!.map((i) => i.AvailabilityZone))).toEqual(new Set(['us-east-1a', 'us-east-1b']));
    const events = await nextEvents(queue, 2);
    const first = events[0]!;
    expect(Object.keys(first).sort()).toEqual(
      ['account', 'detail', 'detail-type', 'id', 'region', 'resources', 'source', 'time', 'version'].sort(),
    );
    expect(first).toMatchObject({
      version: '0',
      'detail-type': 'EC2 Instance-launch Lifecycle Action',
      source: 'aws.autoscaling',
      account: ACCOUNT,
      region: REGION,
      resources: [described.AutoScalingGroupARN],
    });
    expect(first.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(first.detail).toEqual({
      LifecycleActionToken: expect.stringMatching(/^[0-9a-f-]{36}$/),
      AutoScalingGroupName: name,
      LifecycleHookName: 'launch',
      EC2InstanceId: expect.stringMatching(/^i-[0-9a-f]{17}$/),
      LifecycleTransition: LAUNCHING,
      NotificationMetadata: 'meta',
      Origin: 'EC2',
      Destination: 'AutoScalingGroup',
    });
    expect(new Set(events.map((e) => e.detail.EC2InstanceId))).toEqual(
      new Set(described.Instances!.map((i) => i.InstanceId)),
    );
    const tagged = await ec2.send(new DescribeInstancesCommand({ InstanceIds: [first.detail.EC2InstanceId] }));
    const tags = tagged.Reservations?.[0]?.Instances?.[0]?.Tags ?? [];
    expect(tags).toEqual(
      expect.arrayContaining([
        { Key: 'aws:autoscaling:groupName', Value: name },
        { Key: 'cluster', Value: 'c1' },
      ]),
    );
    await client.send(new DeleteAutoScalingGroupCommand({ AutoScalingGroupName: name, ForceDelete: true }));
  });

  it('launches from a launch template with NetworkInterfaces: pod ENIs in the chosen subnet, tagged, at launch', async () => {
    await ec2.send(
      new CreateLaunchTemplateCommand({
        LaunchTemplateName: 'pod-enis',
        LaunchTemplateData: {
          InstanceType: 'm5.xlarge',
          NetworkInterfaces: [
            { DeviceIndex: 0 },
            { DeviceIndex: 1, SecondaryPrivateIpAddressCount: 3, DeleteOnTermination: true },
            { DeviceIndex: 2, SecondaryPrivateIpAddressCount: 2, DeleteOnTermination: true },
          ],
          TagSpecifications: [{ ResourceType: 'network-interface', Tags: [{ Key: 'vpc-lease:cluster', Value: 'c1' }] }],
        },
      }),
    );
    n += 1;
    const name = `asg-${n}`;
    await client.send(
      new CreateAutoScalingGroupCommand({
        AutoScalingGroupName: name,
        MinSize: 0,
        MaxSize: 2,
        DesiredCapacity: 2,
        VPCZoneIdentifier: `${subnetA},${subnetB}`,
        LaunchTemplate: { LaunchTemplateName: 'pod-enis', Version: '$Latest' },
      }),
    );
    const instances = (await describeGroup(name)).Instances ?? [];
    expect(instances).toHaveLength(2);
    for (const i of instances) {
      expect(i.InstanceType).toBe('m5.xlarge');
      const nics = ec2Sim.api.instanceInterfaces(i.InstanceId!);
      const subnet = ec2Sim.api.getInstance(i.InstanceId!)?.subnetId;
      expect(nics.map((x) => [x.deviceIndex, x.subnetId, x.privateIpAddresses.length, x.deleteOnTermination])).toEqual([
        [0, subnet, 1, true],
        [1, subnet, 4, true],
        [2, subnet, 3, true],
      ]);
    }
    await client.send(new DeleteAutoScalingGroupCommand({ AutoScalingGroupName: name, ForceDelete: true }));
  });

  it('puts an instance InService on CONTINUE and terminates and replaces it on ABANDON', async () => {
    const { name, queue } = await group([{ name: 'launch', transition: LAUNCHING }], 2);
    const [a, b] = await nextEvents(queue, 2);
    await client.send(
      new CompleteLifecycleActionCommand({
        AutoScalingGroupName: name,
        LifecycleHookName: 'launch',
        LifecycleActionToken: a!.detail.LifecycleActionToken,
        LifecycleActionResult: 'CONTINUE',
      }),
    );
    await client.send(
      new CompleteLifecycleActionCommand({
        AutoScalingGroupName: name,
        LifecycleHookName: 'launch',
        InstanceId: b!.detail.EC2InstanceId,
        LifecycleActionResult: 'ABANDON',
      }),
    );
    await eventually(
      async () => {
        const instances = (await describeGroup(name)).Instances ?? [];
        return instances.find((i) => i.InstanceId === a!.detail.EC2InstanceId)?.LifecycleState === 'InService';
      },
      { what: 'InService after CONTINUE' },
    );
    await eventually(
      async () => ['shutting-down', 'terminated'].includes((await ec2State(b!.detail.EC2InstanceId)) ?? ''),
      {
        what: 'abandoned instance terminated in EC2',
      },
    );
    // The group replaces the abandoned instance: a third launch, with its own event and token.
    const [replacement] = await nextEvents(queue, 1);
    expect(replacement!.detail.EC2InstanceId).not.toBe(b!.detail.EC2InstanceId);
    expect(replacement!.detail.LifecycleActionToken).not.toBe(b!.detail.LifecycleActionToken);
    const instances = (await describeGroup(name)).Instances!;
    expect(instances.map((i) => i.InstanceId).sort()).toEqual(
      [a!.detail.EC2InstanceId, replacement!.detail.EC2InstanceId].sort(),
    );
    await client.send(new DeleteAutoScalingGroupCommand({ AutoScalingGroupName: name, ForceDelete: true }));
  });

  it('rejects a wrong token, a completed action and an unknown instance with AWS ValidationErrors', async () => {
    const { name, queue } = await group([{ name: 'launch', transition: LAUNCHING }], 1);
    const [event] = await nextEvents(queue, 1);
    const wrong = '00000000-0000-4000-8000-000000000000';
    await expect(
      client.send(
        new CompleteLifecycleActionCommand({
          AutoScalingGroupName: name,
          LifecycleHookName: 'launch',
          LifecycleActionToken: wrong,
          LifecycleActionResult: 'CONTINUE',
        }),
      ),
    ).rejects.toMatchObject({
      name: 'ValidationError',
      message: `No active Lifecycle Action found with token ${wrong}`,
    });
    await expect(
      client.send(
        new RecordLifecycleActionHeartbeatCommand({
          AutoScalingGroupName: name,
          LifecycleHookName: 'launch',
          InstanceId: 'i-0123456789abcdef0',
        }),
      ),
    ).rejects.toMatchObject({ message: 'No active Lifecycle Action found with instance ID i-0123456789abcdef0' });
    const complete = new CompleteLifecycleActionCommand({
      AutoScalingGroupName: name,
      LifecycleHookName: 'launch',
      LifecycleActionToken: event!.detail.LifecycleActionToken,
      LifecycleActionResult: 'CONTINUE',
    });
    await client.send(complete);
    // The same token a second time (a duplicate event processed twice) is no longer active.
    await expect(client.send(complete)).rejects.toMatchObject({ name: 'ValidationError' });
    await expect(
      client.send(
        new TerminateInstanceInAutoScalingGroupCommand({
          InstanceId: 'i-0000000000000000f',
          ShouldDecrementDesiredCapacity: false,
        }),
      ),
    ).rejects.toMatchObject({
      message: 'Instance Id not found - No managed instance found for instance ID: i-0000000000000000f',
    });
    await client.send(new DeleteAutoScalingGroupCommand({ AutoScalingGroupName: name, ForceDelete: true }));
  });

  it('accepts exactly one of many concurrent completions of the same action (duplicate events)', async () => {
    const { name, queue } = await group([{ name: 'launch', transition: LAUNCHING }], 1);
    const [event] = await nextEvents(queue, 1);
    const attempts = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) =>
        client.send(
          new CompleteLifecycleActionCommand({
            AutoScalingGroupName: name,
            LifecycleHookName: 'launch',
            LifecycleActionToken: event!.detail.LifecycleActionToken,
            LifecycleActionResult: i % 2 === 0 ? 'CONTINUE' : 'ABANDON',
          }),
        ),
      ),
    );
    const won = attempts.filter((a) => a.status === 'fulfilled');
    expect(won).toHaveLength(1);
    for (const lost of attempts.filter((a) => a.status === 'rejected')) {
      expect((lost as PromiseRejectedResult).reason).toMatchObject({ name: 'ValidationError' });
    }
    // The winner alone decided the instance's fate.
    const winner = attempts.findIndex((a) => a.status === 'fulfilled');
    const original = event!.detail.EC2InstanceId;
    if (winner % 2 === 0) {
      await eventually(async () => (await describeGroup(name)).Instances?.[0]?.LifecycleState === 'InService', {
        what: 'CONTINUE applied',
      });
      expect((await describeGroup(name)).Instances!.map((i) => i.InstanceId)).toEqual([original]);
    } else {
      const [replacement] = await nextEvents(queue, 1);
      expect(replacement!.detail.EC2InstanceId).not.toBe(original);
      expect((await describeGroup(name)).Instances!.map((i) => i.InstanceId)).toEqual([
        replacement!.detail.EC2InstanceId,
      ]);
    }
    await client.send(new DeleteAutoScalingGroupCommand({ AutoScalingGroupName: name, ForceDelete: true }));
  });

  it('applies the DefaultResult when the heartbeat timeout passes: CONTINUE goes InService', async () => {
    const { name, queue } = await group(
      [{ name: 'launch', transition: LAUNCHING, timeoutS: 30, defaultResult: 'CONTINUE' }],
      1,
    );
    const [event] = await nextEvents(queue, 1);
    await eventually(async () => (await describeGroup(name)).Instances?.[0]?.LifecycleState === 'InService', {
      what: 'InService by default result',
    });
    expect((await describeGroup(name)).Instances?.[0]?.InstanceId).toBe(event!.detail.EC2InstanceId);
    await expect(
      client.send(
        new CompleteLifecycleActionCommand({
          AutoScalingGroupName: name,
          LifecycleHookName: 'launch',
          LifecycleActionToken: event!.detail.LifecycleActionToken,
          LifecycleActionResult: 'CONTINUE',
        }),
      ),
    ).rejects.toMatchObject({ name: 'ValidationError' });
    await client.send(new DeleteAutoScalingGroupCommand({ AutoScalingGroupName: name, ForceDelete: true }));
  });

  it('applies the DefaultResult when the heartbeat timeout passes: ABANDON terminates and replaces', async () => {
    const { name, queue } = await group(
      [{ name: 'launch', transition: LAUNCHING, timeoutS: 30, defaultResult: 'ABANDON' }],
      1,
    );
    const [first] = await nextEvents(queue, 1);
    const [second] = await nextEvents(queue, 1);
    expect(second!.detail.EC2InstanceId).not.toBe(first!.detail.EC2InstanceId);
    expect(['shutting-down', 'terminated']).toContain(await ec2State(first!.detail.EC2InstanceId));
    await client.send(new DeleteAutoScalingGroupCommand({ AutoScalingGroupName: name, ForceDelete: true }));
  });

  it('keeps an action waiting while heartbeats arrive within the timeout', async () => {
    const { name, queue } = await group(
      [{ name: 'launch', transition: LAUNCHING, timeoutS: 30, defaultResult: 'ABANDON' }],
      1,
    );
    const [event] = await nextEvents(queue, 1);
    // 60 simulated seconds are 1.2 s here; heartbeat every ~100 ms for 2.5 timeouts' worth.
    for (let i = 0; i < 30; i += 1) {
      await client.send(
        new RecordLifecycleActionHeartbeatCommand({
          AutoScalingGroupName: name,
          LifecycleHookName: 'launch',
          LifecycleActionToken: event!.detail.LifecycleActionToken,
        }),
      );
      await sleepMs(100);
    }
    const instances = (await describeGroup(name)).Instances!;
    expect(instances).toEqual([
      expect.objectContaining({ InstanceId: event!.detail.EC2InstanceId, LifecycleState: 'Pending:Wait' }),
    ]);
    await client.send(
      new CompleteLifecycleActionCommand({
        AutoScalingGroupName: name,
        LifecycleHookName: 'launch',
        LifecycleActionToken: event!.detail.LifecycleActionToken,
        LifecycleActionResult: 'CONTINUE',
      }),
    );
    await eventually(async () => (await describeGroup(name)).Instances?.[0]?.LifecycleState === 'InService');
    await client.send(new DeleteAutoScalingGroupCommand({ AutoScalingGroupName: name, ForceDelete: true }));
  });

  it('runs terminate hooks on TerminateInstanceInAutoScalingGroup and terminates the EC2 instance on completion', async () => {
    const { name, queue } = await group([{ name: 'drain', transition: TERMINATING }], 2);
    await eventually(
      async () => (await describeGroup(name)).Instances?.every((i) => i.LifecycleState === 'InService'),
      {
        what: 'both InService',
      },
    );
    const victim = (await describeGroup(name)).Instances![0]!.InstanceId!;
    const out = await client.send(
      new TerminateInstanceInAutoScalingGroupCommand({ InstanceId: victim, ShouldDecrementDesiredCapacity: true }),
    );
    expect(out.Activity?.Description).toBe(`Terminating EC2 instance: ${victim}`);
    const described = await describeGroup(name);
    expect(described.DesiredCapacity).toBe(1);
    expect(described.Instances!.find((i) => i.InstanceId === victim)?.LifecycleState).toBe('Terminating:Wait');
    expect(await ec2State(victim)).toBe('running');
    const [event] = await nextEvents(queue, 1);
    expect(event).toMatchObject({
      'detail-type': 'EC2 Instance-terminate Lifecycle Action',
      detail: {
        EC2InstanceId: victim,
        LifecycleTransition: TERMINATING,
        Origin: 'AutoScalingGroup',
        Destination: 'EC2',
      },
    });
    expect(event!.detail).not.toHaveProperty('NotificationMetadata');
    await client.send(
      new CompleteLifecycleActionCommand({
        AutoScalingGroupName: name,
        LifecycleHookName: 'drain',
        LifecycleActionToken: event!.detail.LifecycleActionToken,
        LifecycleActionResult: 'CONTINUE',
      }),
    );
    expect(['shutting-down', 'terminated']).toContain(await ec2State(victim));
    const after = await describeGroup(name);
    expect(after.Instances!.map((i) => i.InstanceId)).not.toContain(victim);
    expect(after.Instances).toHaveLength(1);
    await client.send(new DeleteAutoScalingGroupCommand({ AutoScalingGroupName: name, ForceDelete: true }));
  });

  it('validates SetDesiredCapacity against the group bounds and scales in and out', async () => {
    const { name } = await group([], 1, 2);
    await expect(
      client.send(new SetDesiredCapacityCommand({ AutoScalingGroupName: name, DesiredCapacity: 3 })),
    ).rejects.toMatchObject({
      name: 'ValidationError',
      message: 'New SetDesiredCapacity value 3 is above max value 2 for the AutoScalingGroup.',
    });
    await client.send(new SetDesiredCapacityCommand({ AutoScalingGroupName: name, DesiredCapacity: 2 }));
    expect((await describeGroup(name)).Instances).toHaveLength(2);
    await client.send(new SetDesiredCapacityCommand({ AutoScalingGroupName: name, DesiredCapacity: 0 }));
    expect((await describeGroup(name)).Instances).toHaveLength(0);
    await expect(
      client.send(new SetDesiredCapacityCommand({ AutoScalingGroupName: 'missing', DesiredCapacity: 1 })),
    ).rejects.toMatchObject({ name: 'ValidationError' });
    await client.send(new DeleteAutoScalingGroupCommand({ AutoScalingGroupName: name }));
    expect(
      (await client.send(new DescribeAutoScalingGroupsCommand({ AutoScalingGroupNames: [name] }))).AutoScalingGroups,
    ).toEqual([]);
  });

  it('refuses a second group of the same name', async () => {
    const { name } = await group([], 0);
    await expect(
      client.send(
        new CreateAutoScalingGroupCommand({
          AutoScalingGroupName: name,
          MinSize: 0,
          MaxSize: 1,
          VPCZoneIdentifier: subnetA,
          LaunchTemplate: { LaunchTemplateName: 'nodes' },
        }),
      ),
    ).rejects.toMatchObject({ name: 'AlreadyExistsFault' });
    await client.send(new DeleteAutoScalingGroupCommand({ AutoScalingGroupName: name }));
  });

  it('describes hooks and instances, and creates and updates hooks with PutLifecycleHook', async () => {
    const { name } = await group([], 1);
    await client.send(
      new PutLifecycleHookCommand({
        AutoScalingGroupName: name,
        LifecycleHookName: 'launch',
        LifecycleTransition: LAUNCHING,
        HeartbeatTimeout: 300,
        DefaultResult: 'CONTINUE',
        NotificationMetadata: '{"cluster":"c1"}',
      }),
    );
    await client.send(
      new PutLifecycleHookCommand({ AutoScalingGroupName: name, LifecycleHookName: 'launch', HeartbeatTimeout: 600 }),
    );
    const hooks = await client.send(new DescribeLifecycleHooksCommand({ AutoScalingGroupName: name }));
    expect(hooks.LifecycleHooks).toEqual([
      {
        LifecycleHookName: 'launch',
        AutoScalingGroupName: name,
        LifecycleTransition: LAUNCHING,
        NotificationMetadata: '{"cluster":"c1"}',
        HeartbeatTimeout: 600,
        GlobalTimeout: 60_000,
        DefaultResult: 'CONTINUE',
      },
    ]);
    await expect(
      client.send(
        new PutLifecycleHookCommand({
          AutoScalingGroupName: name,
          LifecycleHookName: 'x',
          LifecycleTransition: LAUNCHING,
          HeartbeatTimeout: 10,
        }),
      ),
    ).rejects.toMatchObject({ name: 'ValidationError' });
    const instanceId = (await describeGroup(name)).Instances![0]!.InstanceId!;
    const described = await client.send(new DescribeAutoScalingInstancesCommand({ InstanceIds: [instanceId] }));
    expect(described.AutoScalingInstances).toEqual([
      expect.objectContaining({
        InstanceId: instanceId,
        AutoScalingGroupName: name,
        InstanceType: 'm5.large',
        HealthStatus: 'HEALTHY',
      }),
    ]);
    await client.send(new DeleteAutoScalingGroupCommand({ AutoScalingGroupName: name, ForceDelete: true }));
  });

  it('replaces an instance terminated behind its back through EC2', async () => {
    const { name } = await group([], 1);
    const original = (await describeGroup(name)).Instances![0]!.InstanceId!;
    ec2Sim.api.terminateInstance(original);
    const replacement = await eventually(
      async () => {
        const ids = ((await describeGroup(name)).Instances ?? []).map((i) => i.InstanceId!);
        return ids.length === 1 && ids[0] !== original ? ids[0] : undefined;
      },
      { what: 'replacement instance' },
    );
    expect(replacement).toMatch(/^i-/);
    await client.send(new DeleteAutoScalingGroupCommand({ AutoScalingGroupName: name, ForceDelete: true }));
  });
});
