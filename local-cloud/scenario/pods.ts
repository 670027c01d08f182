import { instanceArn } from '../../shared/domain/arn.js';
import type { IpFamilySetting } from '../../shared/domain/node.js';
import { partitionIdOfRegion } from '../../shared/domain/partition.js';
import { claimPodLeases } from '../../shared/lease-store/claim-pair.js';
import type { LeaseStore } from '../../shared/lease-store/port.js';
import type { AgentLine, NodeAgent } from './node-agents.js';

/**
 * How the scenario starts and stops pods. Two drivers: the real CNI binary in real namespaces (root), and —
 * without root — the same claim and release calls the plugin makes on the lease store, with no datapath.
 */
export interface Pod {
  readonly name: string;
  readonly containerId: string;
  readonly instanceId: string;
  ifName: string;
  netns: string;
  ip: string;
}

export interface PodCall {
  readonly ok: boolean;
  readonly latencyMs: number;
  readonly ip?: string;
  readonly error?: string;
}

export interface PodDriver {
  readonly kind: 'cni' | 'lease-store';
  /** Makes sure every attached pod ENI of the node has what the driver needs (host interfaces). */
  prepareNode(instanceId: string): Promise<void>;
  add(pod: Pod): Promise<PodCall>;
  del(pod: Pod): Promise<PodCall>;
  /** What the pod's namespace really holds (CNI driver), to compare with its lease; undefined when unknown. */
  podAddress(pod: Pod): Promise<string | undefined>;
  forgetNode(instanceId: string): Promise<void>;
  close(): Promise<void>;
  /** The CNI driver's per-node agents (none without the datapath). */
  agents?(): readonly NodeAgent[];
  agentLines?(): Promise<readonly AgentLine[]>;
}

/**
 * Control plane only: the plugin's two store calls, timed, without namespaces or links. Each node's calls go
 * with that instance's own role session (`storeFor`), as the plugin's do, so the enforcing endpoint judges them
 * by the node policy rather than passing them as the control plane's.
 */
export class LeaseStorePods implements PodDriver {
  readonly kind = 'lease-store';
  private readonly stores = new Map<string, LeaseStore>();

  constructor(
    private readonly storeFor: (instanceId: string) => LeaseStore,
    private readonly region: string,
    private readonly accountId: string,
    private readonly reuseWaitMs: number,
    /** What a pod claims: one lease, or a dual pair on one ENI (claim-pair.ts, as the plugin does). */
    private readonly family: IpFamilySetting = 'ipv4',
  ) {}

  private store(instanceId: string): LeaseStore {
    let store = this.stores.get(instanceId);
    if (!store) {
      store = this.storeFor(instanceId);
      this.stores.set(instanceId, store);
    }
    return store;
  }

  private arnOf(pod: Pod): string {
    return instanceArn(this.region, this.accountId, pod.instanceId, partitionIdOfRegion(this.region));
  }

  async prepareNode(): Promise<void> {}

  async add(pod: Pod): Promise<PodCall> {
    // No namespace is made: the holder records the path a runtime would have given.
    if (!pod.netns) pod.netns = `/var/run/netns/${pod.name}`;
    const start = performance.now();
    try {
      const [lease] = await claimPodLeases(
        this.store(pod.instanceId),
        this.arnOf(pod),
        {
          containerId: pod.containerId,
          ifName: pod.ifName,
          netns: pod.netns,
          podNamespace: 'default',
          podName: pod.name,
        },
        Date.now(),
        this.family,
      );
      return { ok: true, latencyMs: performance.now() - start, ip: lease.ip };
    } catch (err) {
      return { ok: false, latencyMs: performance.now() - start, error: (err as Error).message };
    }
  }

  async del(pod: Pod): Promise<PodCall> {
    const start = performance.now();
    try {
      const holder = { containerId: pod.containerId, ifName: pod.ifName };
      const store = this.store(pod.instanceId);
      // A dual pod's IPv6 lease is found by its holder; the first lease by the address the ADD returned.
      const more =
        this.family === 'dual'
          ? await store.findByHolder(this.arnOf(pod), pod.containerId, pod.ifName, 'ipv6')
          : undefined;
      await store.release(this.arnOf(pod), holder, Date.now(), this.reuseWaitMs, pod.ip || undefined);
      if (more) await store.release(this.arnOf(pod), holder, Date.now(), this.reuseWaitMs, more.ip);
      return { ok: true, latencyMs: performance.now() - start };
    } catch (err) {
      return { ok: false, latencyMs: performance.now() - start, error: (err as Error).message };
    }
  }

  async podAddress(): Promise<string | undefined> {
    return undefined;
  }

  async forgetNode(instanceId: string): Promise<void> {
    this.stores.delete(instanceId);
  }

  async close(): Promise<void> {}
}
