import { HOOKLESS_LAUNCH_PATTERN } from '../../local-cloud/events/lifecycle-rules.js';
import type { LeaseStore } from '../../shared/lease-store/port.js';
import { clusterTagKey } from '../../shared/lifecycle/hookless.js';
import type { ControlPlaneCloud } from '../bench/control-plane-cloud.js';

/**
 * A chaos schedule's nodes without Auto Scaling: instances started with the cluster tag, as Karpenter or a
 * fleet starts them, plus one stranger without the tag that must never get a node item or an ENI. Launches
 * go through the simulator's own API: the launcher is not under test, the control plane is. Node phases are
 * read through `observer` (observer.ts), which the schedule's DynamoDB faults do not reach.
 */
export class HooklessFleet {
  readonly launched: string[] = [];
  stranger = '';

  constructor(
    private readonly c: ControlPlaneCloud,
    private readonly observer: LeaseStore,
  ) {
    c.cloud.putRule('vpc-lease-launch-states', HOOKLESS_LAUNCH_PATTERN, [c.queue]);
  }

  launch(count: number, instanceType: string): void {
    const tag = clusterTagKey(this.c.deps.config);
    const run = (i: number, tags: Record<string, string>) =>
      this.c.cloud.ec2.api.launchInstance({
        instanceType,
        subnetId: this.c.subnetIds[i % this.c.subnetIds.length]!,
        tags,
      }).instanceId;
    for (let i = 0; i < count; i += 1) this.launched.push(run(i, { [tag]: 'owned' }));
    this.stranger = run(count, { Name: 'not-a-node' });
  }

  private state(id: string): string {
    return this.c.cloud.ec2.api.getInstance(id)?.state ?? 'unknown';
  }

  /** The first launch in the middle of provisioning; '' once every launch has finished, undefined meanwhile. */
  async victim(): Promise<string | undefined> {
    for (const id of this.launched) {
      const phase = (await this.observer.getNode(this.c.arnOf(id)))?.phase;
      if (phase === 'PENDING' || phase === 'PROVISIONING') return id;
    }
    return (await this.finished()) ? '' : undefined;
  }

  /** Every launch ended: READY or FAILED, or its instance terminated and its node GONE (or never written). */
  async finished(): Promise<boolean> {
    for (const id of this.launched) {
      const phase = (await this.observer.getNode(this.c.arnOf(id)))?.phase;
      const terminated = this.state(id) === 'terminated';
      if (!(terminated ? phase === undefined || phase === 'GONE' : phase === 'READY' || phase === 'FAILED'))
        return false;
    }
    return true;
  }

  terminateAll(): void {
    for (const id of [...this.launched, this.stranger]) this.c.cloud.ec2.api.terminateInstance(id);
  }

  /** What went wrong from the fleet's side: unfinished launches, a provisioned stranger, a hook call. */
  async violations(): Promise<string[]> {
    const out: string[] = [];
    for (const id of this.launched) {
      const phase = (await this.observer.getNode(this.c.arnOf(id)))?.phase;
      if (this.state(id) !== 'terminated' && phase !== 'READY' && phase !== 'FAILED')
        out.push(`invariant 4: hook-less launch of ${id} never finished (phase ${phase ?? 'none'})`);
    }
    if (await this.observer.getNode(this.c.arnOf(this.stranger)))
      out.push(`untagged instance ${this.stranger} got a node item`);
    const strangerEnis = this.c.cloud.ec2.api.instanceInterfaces(this.stranger).filter((i) => i.deviceIndex > 0);
    if (strangerEnis.length > 0) out.push(`untagged instance ${this.stranger} got ${strangerEnis.length} pod ENIs`);
    if (this.c.outcomes.length > 0) out.push(`${this.c.outcomes.length} lifecycle actions without any hook`);
    return out;
  }
}
