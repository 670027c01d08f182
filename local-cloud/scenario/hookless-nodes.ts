import {
  type EC2Client,
  RunInstancesCommand,
  type RunInstancesCommandInput,
  TerminateInstancesCommand,
} from '@aws-sdk/client-ec2';
import { instanceArn } from '../../shared/domain/arn.js';
import type { LeaseStore } from '../../shared/lease-store/port.js';
import { STATE_CHANGE_DETAIL_TYPE } from '../../shared/lifecycle/events.js';
import type { LocalCloud } from '../cloud.js';
import { type ScenarioNodes, sayNodes, untilGone } from './node-group.js';
import { until } from './until.js';

/**
 * The scenario's nodes without Auto Scaling (`--hookless`): instances started by RunInstances with the cluster
 * tag, as Karpenter or a fleet starts them, provisioned from EC2's pending/running state changes alone. Each
 * launch is timed from its `pending` event on the bus to its node item READY.
 */
export class HooklessNodes implements ScenarioNodes {
  readonly inService = new Set<string>();
  readonly launchMs: number[] = [];
  readonly terminateMs: number[] = [];
  readonly launchLabel = 'EC2 pending→READY';
  private readonly pendingAt = new Map<string, number>();
  private readonly terminatedAt = new Map<string, number>();

  constructor(
    private readonly cloud: LocalCloud,
    private readonly ec2: EC2Client,
    private readonly store: LeaseStore,
    private readonly tags: Readonly<Record<string, string>>,
    private readonly say: (line: string) => void,
  ) {
    cloud.bus.subscribe((event) => {
      if (event['detail-type'] !== STATE_CHANGE_DETAIL_TYPE) return;
      const { 'instance-id': id, state } = event.detail as { 'instance-id': string; state: string };
      const seen = state === 'pending' ? this.pendingAt : state === 'terminated' ? this.terminatedAt : undefined;
      if (seen && !seen.has(id)) seen.set(id, Date.now());
    });
  }

  arnOf(instanceId: string): string {
    return instanceArn(this.cloud.region, this.cloud.accountId, instanceId, this.cloud.partition);
  }

  async scaleOut(nodes: number, instanceType: string, subnetIds: readonly string[]): Promise<void> {
    const launched: string[] = [];
    // One RunInstances per node, spread over the subnets as a fleet spreads over its zones.
    for (let i = 0; i < nodes; i += 1) {
      const out = await this.ec2.send(
        new RunInstancesCommand({
          InstanceType: instanceType as RunInstancesCommandInput['InstanceType'],
          MinCount: 1,
          MaxCount: 1,
          SubnetId: subnetIds[i % subnetIds.length],
          TagSpecifications: [
            { ResourceType: 'instance', Tags: Object.entries(this.tags).map(([Key, Value]) => ({ Key, Value })) },
          ],
        }),
      );
      launched.push(...(out.Instances ?? []).map((x) => x.InstanceId ?? ''));
    }
    this.say(
      `RunInstances: ${nodes} × ${instanceType} tagged ${Object.keys(this.tags).join(', ')} (no group, no hook)`,
    );
    await until(
      `${nodes} hook-less nodes READY`,
      async () => {
        for (const id of launched) {
          if (this.inService.has(id) || (await this.store.getNode(this.arnOf(id)))?.phase !== 'READY') continue;
          this.inService.add(id);
          this.launchMs.push(Date.now() - (this.pendingAt.get(id) ?? Date.now()));
          this.say(`  node ${id} READY (${this.inService.size}/${nodes})`);
        }
        return this.inService.size >= nodes;
      },
      60_000 + nodes * 10_000,
    );
    await sayNodes(this.store, this, this.say);
  }

  async terminate(instanceId: string): Promise<void> {
    const askedMs = Date.now();
    await this.ec2.send(new TerminateInstancesCommand({ InstanceIds: [instanceId] }));
    await untilGone(this.cloud, this.store, instanceId);
    this.terminateMs.push(Date.now() - (this.terminatedAt.get(instanceId) ?? askedMs));
    this.inService.delete(instanceId);
  }
}
