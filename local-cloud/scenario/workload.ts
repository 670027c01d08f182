import { instanceArn } from '../../shared/domain/arn.js';
import { partitionIdOfRegion } from '../../shared/domain/partition.js';
import type { LeaseStore } from '../../shared/lease-store/port.js';
import { sleepMs } from '../../shared/sleep.js';
import type { Pod, PodDriver } from './pods.js';

/**
 * The pods of the scenario: start, churn and drain them through a PodDriver, timing every call, and check
 * invariant 1 from the outside (one holder per address; a repeated ADD returns the same address; what a pod's
 * namespace holds is its lease).
 */
export interface WorkloadDeps {
  readonly driver: PodDriver;
  readonly store: LeaseStore;
  readonly region: string;
  readonly accountId: string;
  /** The pool-manager, invoked when a node runs out of claimable leases (what its stream trigger does in AWS). */
  readonly topUp: () => Promise<unknown>;
  readonly runId: string;
  readonly concurrency: number;
  /**
   * How long a pod waits before its next ADD after "no claimable lease": a node at its address ceiling has its
   * released leases in the reuse wait, so the retry must outlast it — by time, never by how fast the calls ran.
   */
  readonly retryDelayMs: number;
  readonly progress?: (line: string) => void;
}

export class Workload {
  readonly running = new Map<string, Pod>();
  readonly addMs: number[] = [];
  readonly delMs: number[] = [];
  addFailures = 0;
  delFailures = 0;
  started = 0;
  deleted = 0;
  readonly errors: string[] = [];
  readonly violations: string[] = [];
  private counter = 0;

  constructor(private readonly deps: WorkloadDeps) {}

  /**
   * Starts up to `count` pods, each on the node with the most room left (capacity = the node's max pods minus its
   * host-network pods), as a scheduler would; never more than the nodes can hold. Returns how many it placed.
   */
  async start(count: number, capacity: ReadonlyMap<string, number>): Promise<number> {
    const placed = new Map<string, number>();
    for (const id of capacity.keys()) placed.set(id, this.podsOn(id).length);
    const pods: Pod[] = [];
    for (let i = 0; i < count; i += 1) {
      let best: string | undefined;
      let room = 0;
      for (const [id, cap] of capacity) {
        const free = cap - (placed.get(id) ?? 0);
        if (free > room) [best, room] = [id, free];
      }
      if (!best) break;
      placed.set(best, (placed.get(best) ?? 0) + 1);
      this.counter += 1;
      const n = this.counter;
      pods.push({
        name: `pod-${n}`,
        containerId: `ctr-${this.deps.runId}-${n}`,
        instanceId: best,
        ifName: 'eth0',
        netns: '',
        ip: '',
      });
    }
    await this.each(pods, async (pod) => {
      for (let attempt = 1; ; attempt += 1) {
        const call = await this.deps.driver.add(pod);
        if (call.ok && call.ip) {
          pod.ip = call.ip;
          this.addMs.push(call.latencyMs);
          this.started += 1;
          this.running.set(pod.containerId, pod);
          if (this.started % 10 === 0) this.deps.progress?.(`  ${this.running.size} pods running`);
          return;
        }
        // No claimable lease yet: the pool-manager tops the node up (in AWS its stream trigger does this on
        // the claim that emptied the pool), then the runtime retries the ADD.
        // A new ENI's host interface appears once it is attached (prepareNode), like udev on a real node.
        if (attempt < 4 && /claimable|NoFreeLease|MasterMissing|try again/i.test(call.error ?? '')) {
          await this.deps.topUp();
          await this.deps.driver.prepareNode(pod.instanceId);
          // Like kubelet's back-off: 1×, 2×, 3× the delay, so the last try comes after any lease released
          // before the first has left its reuse wait.
          await sleepMs(this.deps.retryDelayMs * attempt);
          continue;
        }
        this.addFailures += 1;
        this.errors.push(`ADD ${pod.name} on ${pod.instanceId}: ${call.error}`);
        if (pod.netns) await this.deps.driver.del(pod); // what a runtime does after a failed ADD
        return;
      }
    });
    return pods.length;
  }

  async stop(pods: readonly Pod[]): Promise<void> {
    await this.each(pods, async (pod) => {
      const call = await this.deps.driver.del(pod);
      this.running.delete(pod.containerId);
      if (call.ok) {
        this.delMs.push(call.latencyMs);
        this.deleted += 1;
      } else {
        this.delFailures += 1;
        this.errors.push(`DEL ${pod.name}: ${call.error}`);
      }
    });
  }

  /** Every other running pod goes, then new ones arrive: a net growth of about 20 % per round. */
  async churn(capacity: ReadonlyMap<string, number>): Promise<void> {
    const pods = [...this.running.values()];
    const leaving = pods.filter((_, i) => i % 2 === 0);
    await this.stop(leaving);
    await this.deps.topUp();
    await this.start(Math.ceil(pods.length * 0.7), capacity);
  }

  podsOn(instanceId: string): Pod[] {
    return [...this.running.values()].filter((p) => p.instanceId === instanceId);
  }

  /**
   * Invariant 1 from the outside. A repeated ADD of a sample of pods must return their address; every running
   * pod's lease names it as holder with that address; no two pods share an address; the CNI driver also reads
   * the address inside each namespace.
   */
  async checkHolders(sample: number): Promise<void> {
    const pods = [...this.running.values()];
    for (const pod of pods.slice(0, sample)) {
      const again = await this.deps.driver.add(pod);
      if (!again.ok || again.ip !== pod.ip)
        this.violations.push(`repeated ADD of ${pod.name} returned ${again.ip ?? again.error}, not ${pod.ip}`);
    }
    const byIp = new Map<string, string>();
    for (const pod of pods) {
      const other = byIp.get(pod.ip);
      if (other) this.violations.push(`${pod.name} and ${other} both hold ${pod.ip}`);
      byIp.set(pod.ip, pod.name);
      const arn = instanceArn(
        this.deps.region,
        this.deps.accountId,
        pod.instanceId,
        partitionIdOfRegion(this.deps.region),
      );
      const lease = await this.deps.store.findByHolder(arn, pod.containerId, pod.ifName);
      if (lease?.ip !== pod.ip)
        this.violations.push(`${pod.name} holds ${pod.ip} but the store says its lease is ${lease?.ip ?? 'none'}`);
      const inside = await this.deps.driver.podAddress(pod);
      if (inside !== undefined && inside !== pod.ip)
        this.violations.push(`${pod.name}'s namespace has ${inside}, its lease is ${pod.ip}`);
    }
  }

  private async each(pods: readonly Pod[], fn: (pod: Pod) => Promise<void>): Promise<void> {
    let next = 0;
    const worker = async (): Promise<void> => {
      for (;;) {
        const pod = pods[next];
        next += 1;
        if (!pod) return;
        await fn(pod);
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.deps.concurrency, pods.length) }, worker));
  }
}
