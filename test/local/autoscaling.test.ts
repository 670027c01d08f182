import {
  CompleteLifecycleActionCommand,
  CreateAutoScalingGroupCommand,
  DeleteAutoScalingGroupCommand,
  RecordLifecycleActionHeartbeatCommand,
  TerminateInstanceInAutoScalingGroupCommand,
} from '@aws-sdk/client-auto-scaling';
import { CreateLaunchTemplateCommand, DescribeInstancesCommand } from '@aws-sdk/client-ec2';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type AsgFixture, LAUNCHING, startAsgFixture } from './autoscaling-fixture.js';
import { ACCOUNT, eventually, REGION, sleepMs } from './helpers.js';

describe('Auto Scaling simulator over the Query protocol: lifecycle actions', () => {
  let f: AsgFixture;
  let client: AsgFixture['client'];
  let ec2: AsgFixture['ec2'];
  let ec2Sim: AsgFixture['ec2Sim'];
  let subnetA: AsgFixture['subnetA'];
  let subnetB: AsgFixture['subnetB'];
  beforeAll(async () => {
    f = await startAsgFixture();
    ({ client, ec2, ec2Sim, subnetA, subnetB } = f);
  });
  afterEach(() => f.clearRules());
  afterAll(async () => {
    await f.close();
  });
  const group: AsgFixture['group'] = (...args) => f.group(...args);
  const describeGroup: AsgFixture['describeGroup'] = (name) => f.describeGroup(name);
  const nextEvents: AsgFixture['nextEvents'] = (queue, count) => f.nextEvents(queue, count);
  const ec2State: AsgFixture['ec2State'] = (id) => f.ec2State(id);

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
    const name = f.nextGroupName();
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
});
