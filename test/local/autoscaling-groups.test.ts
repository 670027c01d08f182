import {
  CompleteLifecycleActionCommand,
  CreateAutoScalingGroupCommand,
  DeleteAutoScalingGroupCommand,
  DescribeAutoScalingGroupsCommand,
  DescribeAutoScalingInstancesCommand,
  DescribeLifecycleHooksCommand,
  PutLifecycleHookCommand,
  SetDesiredCapacityCommand,
  TerminateInstanceInAutoScalingGroupCommand,
} from '@aws-sdk/client-auto-scaling';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type AsgFixture, LAUNCHING, startAsgFixture, TERMINATING } from './autoscaling-fixture.js';
import { eventually } from './helpers.js';

describe('Auto Scaling simulator over the Query protocol: groups, terminate hooks, hooks API', () => {
  let f: AsgFixture;
  let client: AsgFixture['client'];
  let ec2Sim: AsgFixture['ec2Sim'];
  let subnetA: AsgFixture['subnetA'];
  beforeAll(async () => {
    f = await startAsgFixture();
    ({ client, ec2Sim, subnetA } = f);
  });
  afterEach(() => f.clearRules());
  afterAll(async () => {
    await f.close();
  });
  const group: AsgFixture['group'] = (...args) => f.group(...args);
  const describeGroup: AsgFixture['describeGroup'] = (name) => f.describeGroup(name);
  const nextEvents: AsgFixture['nextEvents'] = (queue, count) => f.nextEvents(queue, count);
  const ec2State: AsgFixture['ec2State'] = (id) => f.ec2State(id);

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
