import {
  AutoScalingClient,
  CreateAutoScalingGroupCommand,
  DescribeAutoScalingGroupsCommand,
} from '@aws-sdk/client-auto-scaling';
import { DescribeInstancesCommand, EC2Client } from '@aws-sdk/client-ec2';
import type { AutoScalingSimulatorHandle } from '../../local-cloud/autoscaling/index.js';
import { startAutoScalingSimulator } from '../../local-cloud/autoscaling/index.js';
import type { Ec2SimulatorServer } from '../../local-cloud/ec2/index.js';
import { startEc2Simulator } from '../../local-cloud/ec2/index.js';
import { EventBus } from '../../local-cloud/events/bus.js';
import type { BusEvent, LifecycleActionDetail } from '../../local-cloud/events/event.js';
import type { SimScheduler } from '../../local-cloud/events/scheduler.js';
import { createScheduler } from '../../local-cloud/events/scheduler.js';
import { queueTarget } from '../../local-cloud/events/targets.js';
import { SqsEngine } from '../../local-cloud/sqs/engine.js';
import type { Queue } from '../../local-cloud/sqs/queue.js';
import { ACCOUNT, eventually, LOCAL_CREDENTIALS, REGION } from './helpers.js';

// 1 simulated second = 20 real ms: a 30 s hook times out after 0.6 s, EC2's 15 s boot takes 0.3 s.
export const TIME_SCALE = 0.02;
export const LAUNCHING = 'autoscaling:EC2_INSTANCE_LAUNCHING';
export const TERMINATING = 'autoscaling:EC2_INSTANCE_TERMINATING';

export type AsgFixture = Awaited<ReturnType<typeof startAsgFixture>>;

/**
 * The Auto Scaling simulator behind its Query endpoint over the EC2 simulator (two subnets), with an event bus
 * and an SQS engine: what the group lifecycle suites (autoscaling*.test.ts) share. Each group's lifecycle events
 * land in a queue of its own.
 */
export async function startAsgFixture() {
  let n = 0;
  /** A fresh group name; its number also names the group's queue and rule. */
  const nextGroupName = (): string => {
    n += 1;
    return `asg-${n}`;
  };
  const scheduler: SimScheduler = createScheduler({ timeScale: TIME_SCALE });
  const ec2Sim: Ec2SimulatorServer = await startEc2Simulator({
    timeScale: TIME_SCALE,
    region: REGION,
    accountId: ACCOUNT,
    seed: 7,
  });
  const vpc = ec2Sim.admin.seedVpc('10.0.0.0/16');
  const subnetA = ec2Sim.admin.seedSubnet(vpc.vpcId, '10.0.1.0/24', 'us-east-1a').subnetId;
  const subnetB = ec2Sim.admin.seedSubnet(vpc.vpcId, '10.0.2.0/24', 'us-east-1b').subnetId;
  const bus = new EventBus();
  const engine = new SqsEngine({ scheduler, region: REGION, accountId: ACCOUNT });
  const asg: AutoScalingSimulatorHandle = await startAutoScalingSimulator({
    ec2: ec2Sim.api,
    scheduler,
    emit: (e) => bus.put(e),
  });
  const client = new AutoScalingClient({
    endpoint: asg.endpoint,
    region: REGION,
    credentials: LOCAL_CREDENTIALS,
    maxAttempts: 1,
  });
  const ec2 = new EC2Client({
    endpoint: ec2Sim.endpoint,
    region: REGION,
    credentials: LOCAL_CREDENTIALS,
    maxAttempts: 1,
  });

  /** A group whose lifecycle events land in a fresh queue. */
  const group = async (
    hooks: { name: string; transition: string; timeoutS?: number; defaultResult?: string; metadata?: string }[],
    desired: number,
    max = 4,
  ): Promise<{ name: string; queue: Queue }> => {
    const name = nextGroupName();
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

  return {
    scheduler,
    ec2Sim,
    asg,
    client,
    ec2,
    bus,
    engine,
    subnetA,
    subnetB,
    group,
    nextGroupName,
    describeGroup,
    nextEvents,
    ec2State,
    clearRules(): void {
      for (const rule of bus.listRules()) bus.deleteRule(rule.name);
    },
    async close(): Promise<void> {
      client.destroy();
      ec2.destroy();
      await asg.close();
      engine.close();
      await ec2Sim.close();
      scheduler.close();
    },
  };
}
