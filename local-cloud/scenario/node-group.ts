import {
  type AutoScalingClient,
  SetDesiredCapacityCommand,
  TerminateInstanceInAutoScalingGroupCommand,
} from '@aws-sdk/client-auto-scaling';
import { instanceArn } from '../../shared/domain/arn.js';
import type { LeaseStore } from '../../shared/lease-store/port.js';
import { LAUNCH_DETAIL_TYPE, TERMINATE_DETAIL_TYPE } from '../../shared/lifecycle/events.js';
import { LAUNCHING, TERMINATING } from '../autoscaling/simulator.js';
import type { LocalCloud } from '../cloud.js';
import { LAUNCH_HOOK, TERMINATE_HOOK } from './deploy.js';
import { until } from './until.js';

export const GROUP_NAME = 'vpc-lease-nodes';

/** The scenario's nodes, however they are launched: an Auto Scaling group with hooks, or hook-less instances. */
export interface ScenarioNodes {
  /** Instances whose launch finished (InService, or READY without a hook), by launch order. */
  readonly inService: Set<string>;
  /** Real ms from the launch's first event (hook or EC2 pending) to InService / READY. */
  readonly launchMs: number[];
  readonly terminateMs: number[];
  /** How the launch latency is labelled in the report. */
  readonly launchLabel: string;
  arnOf(instanceId: string): string;
  scaleOut(nodes: number, instanceType: string, subnetIds: readonly string[], hookTimeoutS: number): Promise<void>;
  /** Terminates the instance, then waits until EC2 has terminated it and its node item is GONE. */
  terminate(instanceId: string): Promise<void>;
}

/**
 * The scenario's Auto Scaling group: created with the hooks the construct puts on a group (launch ABANDONs and
 * terminate CONTINUEs by default), scaled out and in through the Auto Scaling API. It times each lifecycle from
 * the hook's event on the bus (when AWS would emit it) to the outcome the operator sees.
 */
export class NodeGroup implements ScenarioNodes {
  readonly inService = new Set<string>();
  readonly launchLabel = 'launch hook→InSvc';
  readonly launchMs: number[] = [];
  readonly terminateMs: number[] = [];
  private readonly launchEventAt = new Map<string, number>();
  private readonly terminateEventAt = new Map<string, number>();

  constructor(
    private readonly cloud: LocalCloud,
    private readonly asg: AutoScalingClient,
    private readonly store: LeaseStore,
    private readonly say: (line: string) => void,
  ) {
    cloud.bus.subscribe((event) => {
      const id = (event.detail as { EC2InstanceId?: string }).EC2InstanceId;
      if (!id) return;
      const seen = event['detail-type'] === LAUNCH_DETAIL_TYPE ? this.launchEventAt : this.terminateEventAt;
      if (event['detail-type'] !== LAUNCH_DETAIL_TYPE && event['detail-type'] !== TERMINATE_DETAIL_TYPE) return;
      if (!seen.has(id)) seen.set(id, Date.now());
    });
  }

  arnOf(instanceId: string): string {
    return instanceArn(this.cloud.region, this.cloud.accountId, instanceId, this.cloud.partition);
  }

  async scaleOut(
    nodes: number,
    instanceType: string,
    subnetIds: readonly string[],
    hookTimeoutS: number,
  ): Promise<void> {
    this.cloud.autoScaling.simulator.createGroup({
      name: GROUP_NAME,
      minSize: 0,
      maxSize: nodes + 5,
      desiredCapacity: 0,
      instanceTypes: [instanceType],
      subnetIds,
      hooks: [
        { name: LAUNCH_HOOK, transition: LAUNCHING, heartbeatTimeoutS: hookTimeoutS, defaultResult: 'ABANDON' },
        { name: TERMINATE_HOOK, transition: TERMINATING, heartbeatTimeoutS: hookTimeoutS, defaultResult: 'CONTINUE' },
      ],
    });
    await this.asg.send(new SetDesiredCapacityCommand({ AutoScalingGroupName: GROUP_NAME, DesiredCapacity: nodes }));
    this.say(`Auto Scaling group ${GROUP_NAME}: scaling out to ${nodes} × ${instanceType}`);
    await until(
      `${nodes} nodes InService`,
      () => {
        for (const i of this.cloud.autoScaling.simulator.getGroup(GROUP_NAME)?.instances.values() ?? []) {
          if (i.lifecycleState !== 'InService' || this.inService.has(i.instanceId)) continue;
          this.inService.add(i.instanceId);
          this.launchMs.push(Date.now() - (this.launchEventAt.get(i.instanceId) ?? Date.now()));
          this.say(`  node ${i.instanceId} InService (${this.inService.size}/${nodes})`);
        }
        return this.inService.size >= nodes;
      },
      60_000 + nodes * 10_000,
    );
    await sayNodes(this.store, this, this.say);
  }

  /** TerminateInstanceInAutoScalingGroup, then waits until EC2 has terminated it and its node item is GONE. */
  async terminate(instanceId: string): Promise<void> {
    const askedMs = Date.now();
    await this.asg.send(
      new TerminateInstanceInAutoScalingGroupCommand({ InstanceId: instanceId, ShouldDecrementDesiredCapacity: true }),
    );
    await untilGone(this.cloud, this.store, instanceId);
    this.terminateMs.push(Date.now() - (this.terminateEventAt.get(instanceId) ?? askedMs));
    this.inService.delete(instanceId);
  }
}

/** Waits until EC2 has terminated the instance and its node item is GONE (or was never written). */
export async function untilGone(cloud: LocalCloud, store: LeaseStore, instanceId: string): Promise<void> {
  const arn = instanceArn(cloud.region, cloud.accountId, instanceId, cloud.partition);
  await until(`${instanceId} GONE`, async () => {
    const node = await store.getNode(arn);
    return cloud.ec2.api.getInstance(instanceId)?.state === 'terminated' && (!node || node.phase === 'GONE');
  });
}

/** One progress line per launched node: its phase, pod ENIs and max pods. */
export async function sayNodes(store: LeaseStore, nodes: ScenarioNodes, say: (line: string) => void): Promise<void> {
  for (const id of nodes.inService) {
    const node = await store.getNode(nodes.arnOf(id));
    say(`  ${id}: ${node?.phase}, ${node?.enis.length} pod ENI(s), max pods ${node?.maxPods}`);
  }
}
