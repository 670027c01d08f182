import {
  isClaimable,
  type Lease,
  type LeaseHolder,
  type LeaseState,
  type NewLease,
  sameHolder,
} from '../../shared/domain/lease.js';
import type { NodeRecord } from '../../shared/domain/node.js';
import {
  LeaseConflictError,
  LeaseNotFoundError,
  NodeNotFoundError,
  NoFreeLeaseError,
  VersionConflictError,
} from '../../shared/errors.js';
import { type IpFamily, ipFamilyOf } from '../../shared/ipv6.js';
import type { ClaimOptions, HolderRef, LeaseStore, NodeCursor, NodeRefPage } from '../../shared/lease-store/port.js';
import { nodeIndexShard, nodeIndexShards } from '../../shared/lease-store/table.js';
import { CLAIM_DEFAULTS, leaseStoreChecks } from '../../shared/lease-store/validate.js';

type Operation = keyof LeaseStore;

/**
 * The faithful fake of the lease store: the same state machine and conditions as DynamoLeaseStore (and the
 * same contract suite), with the same race window — a claim reads its candidates, yields, then checks the
 * version it read, so concurrent claims in tests really collide. Injectable failures for callers' tests.
 */
export class MemoryLeaseStore implements LeaseStore {
  private readonly leases = new Map<string, Map<string, Lease>>();
  private readonly nodes = new Map<string, NodeRecord>();
  private readonly faults: { operation: Operation; error: Error; remaining: number }[] = [];

  constructor(private readonly random: () => number = Math.random) {}

  /** The next `times` calls of `operation` throw `error` (e.g. a StoreUnavailableError) before doing anything. */
  failNext(operation: Operation, error: Error, times = 1): void {
    this.faults.push({ operation, error, remaining: times });
  }

  async putLeases(leases: readonly NewLease[], nowMs: number): Promise<void> {
    leaseStoreChecks.putLeases(leases, nowMs);
    await this.enter('putLeases');
    for (const lease of leases) {
      const partition = this.partition(lease.instanceArn);
      if (partition.has(lease.ip)) continue;
      partition.set(lease.ip, {
        instanceArn: lease.instanceArn,
        ip: lease.ip,
        state: 'FREE',
        eniId: lease.eniId,
        deviceIndex: lease.deviceIndex,
        mac: lease.mac,
        subnetId: lease.subnetId,
        subnetCidr: lease.subnetCidr,
        gateway: lease.gateway,
        ...(lease.prefix !== undefined ? { prefix: lease.prefix } : {}),
        createdAtMs: nowMs,
        reusableAtMs: nowMs,
        version: 1,
      });
    }
  }

  async claim(instanceArn: string, holder: LeaseHolder, nowMs: number, options: ClaimOptions = {}): Promise<Lease> {
    leaseStoreChecks.claim(instanceArn, holder, nowMs, options);
    const { candidates = CLAIM_DEFAULTS.candidates, maxAttempts = CLAIM_DEFAULTS.maxAttempts } = options;
    await this.enter('claim');
    if (options.checkExisting ?? true) {
      const existing = this.held(instanceArn, holder, options.family);
      if (existing) return existing;
    }
    const wanted = (l: Lease): boolean => matches(l, options) && isClaimable(l, nowMs);
    const lost = new Set<string>();
    for (;;) {
      const page = [...this.partition(instanceArn).values()]
        .filter((l) => wanted(l) && !lost.has(l.ip))
        .sort((a, b) => (a.reusableAtMs ?? 0) - (b.reusableAtMs ?? 0))
        .slice(0, candidates);
      const pick = page[Math.floor(this.random() * page.length)] ?? page[0];
      if (!pick) throw new NoFreeLeaseError(instanceArn);
      // The window between DynamoDB's Query and UpdateItem, where other claimers run.
      await tick();
      const current = this.partition(instanceArn).get(pick.ip);
      const mine = current?.state === 'CLAIMED' && current.holder !== undefined && sameHolder(current.holder, holder);
      if (current && ((isClaimable(current, nowMs) && current.version === pick.version) || mine)) {
        const { reusableAtMs: _, holder: __, ...rest } = current;
        return this.write({ ...rest, state: 'CLAIMED', holder: { ...holder }, claimedAtMs: nowMs });
      }
      lost.add(pick.ip);
      if (lost.size >= maxAttempts) {
        const left = [...this.partition(instanceArn).values()].some((l) => wanted(l) && !lost.has(l.ip));
        if (!left) throw new NoFreeLeaseError(instanceArn);
        throw new LeaseConflictError(`failed to claim a lease on ${instanceArn}: lost ${lost.size} races in a row`);
      }
    }
  }

  async findByHolder(
    instanceArn: string,
    containerId: string,
    ifName: string,
    family?: IpFamily,
  ): Promise<Lease | undefined> {
    leaseStoreChecks.findByHolder(instanceArn, containerId, ifName, family);
    await this.enter('findByHolder');
    return this.held(instanceArn, { containerId, ifName }, family);
  }

  async release(
    instanceArn: string,
    holder: HolderRef,
    nowMs: number,
    reuseWaitMs: number,
    ip?: string,
  ): Promise<Lease | undefined> {
    leaseStoreChecks.release(instanceArn, holder, nowMs, reuseWaitMs, ip);
    await this.enter('release');
    const current = ip === undefined ? this.held(instanceArn, holder) : this.partition(instanceArn).get(ip);
    if (current?.state !== 'CLAIMED' || !current.holder || !sameHolder(current.holder, holder)) return undefined;
    const { holder: _, ...rest } = current;
    return this.write({ ...rest, state: 'COOLDOWN', releasedAtMs: nowMs, reusableAtMs: nowMs + reuseWaitMs });
  }

  async markReleasing(instanceArn: string, ip: string, nowMs: number, freeSinceBeforeMs?: number): Promise<Lease> {
    leaseStoreChecks.markReleasing(instanceArn, ip, nowMs, freeSinceBeforeMs);
    await this.enter('markReleasing');
    const current = this.partition(instanceArn).get(ip);
    if (!current) throw new LeaseNotFoundError(instanceArn, ip);
    const free =
      (current.state === 'FREE' || current.state === 'COOLDOWN') &&
      (freeSinceBeforeMs === undefined || (current.reusableAtMs ?? 0) <= freeSinceBeforeMs);
    const retried = current.state === 'RELEASING' && current.releasedAtMs === nowMs;
    if (!free && !retried) {
      throw new LeaseConflictError(
        `failed to mark RELEASING lease ${ip} of ${instanceArn}: it is ${current.state}`,
        current,
      );
    }
    const { reusableAtMs: _, ...rest } = current;
    return this.write({ ...rest, state: 'RELEASING', releasedAtMs: nowMs });
  }

  async revertReleasing(instanceArn: string, ip: string, nowMs: number): Promise<Lease> {
    leaseStoreChecks.revertReleasing(instanceArn, ip, nowMs);
    await this.enter('revertReleasing');
    const current = this.partition(instanceArn).get(ip);
    if (!current) throw new LeaseNotFoundError(instanceArn, ip);
    if (current.state !== 'RELEASING') {
      throw new LeaseConflictError(
        `failed to revert RELEASING lease ${ip} of ${instanceArn}: it is ${current.state}`,
        current,
      );
    }
    return this.write({ ...current, state: 'FREE', reusableAtMs: nowMs });
  }

  async deleteReleasing(instanceArn: string, ip: string): Promise<void> {
    leaseStoreChecks.deleteReleasing(instanceArn, ip);
    await this.enter('deleteReleasing');
    const current = this.partition(instanceArn).get(ip);
    if (!current) return;
    if (current.state !== 'RELEASING') {
      throw new LeaseConflictError(
        `failed to delete lease ${ip} of ${instanceArn}: it is ${current.state}, not RELEASING`,
        current,
      );
    }
    this.partition(instanceArn).delete(ip);
  }

  async deleteNodePartition(instanceArn: string): Promise<number> {
    leaseStoreChecks.deleteNodePartition(instanceArn);
    await this.enter('deleteNodePartition');
    const count = (this.leases.get(instanceArn)?.size ?? 0) + (this.nodes.has(instanceArn) ? 1 : 0);
    this.leases.delete(instanceArn);
    this.nodes.delete(instanceArn);
    this.passMarkers.delete(instanceArn);
    return count;
  }

  async getLease(instanceArn: string, ip: string): Promise<Lease | undefined> {
    leaseStoreChecks.getLease(instanceArn, ip);
    await this.enter('getLease');
    return this.leases.get(instanceArn)?.get(ip);
  }

  /** Always current: memory has no replicas, so an eventual read is a consistent one. */
  async listLeases(instanceArn: string, filter: { state?: LeaseState; eventual?: boolean } = {}): Promise<Lease[]> {
    leaseStoreChecks.listLeases(instanceArn, filter);
    await this.enter('listLeases');
    // DynamoDB returns a partition in sort-key order: `ip#10.0.0.10` before `ip#10.0.0.9`.
    return [...(this.leases.get(instanceArn)?.values() ?? [])]
      .filter((l) => filter.state === undefined || l.state === filter.state)
      .sort((a, b) => (`ip#${a.ip}` < `ip#${b.ip}` ? -1 : 1));
  }

  async countClaimable(instanceArn: string, nowMs: number): Promise<number> {
    leaseStoreChecks.countClaimable(instanceArn, nowMs);
    await this.enter('countClaimable');
    return [...(this.leases.get(instanceArn)?.values() ?? [])].filter((l) => isClaimable(l, nowMs)).length;
  }

  async getNode(instanceArn: string): Promise<NodeRecord | undefined> {
    leaseStoreChecks.getNode(instanceArn);
    await this.enter('getNode');
    const node = this.nodes.get(instanceArn);
    return node ? structuredClone(node) : undefined;
  }

  async createNode(node: NodeRecord): Promise<boolean> {
    leaseStoreChecks.createNode(node);
    await this.enter('createNode');
    if (this.nodes.has(node.instanceArn)) return false;
    this.nodes.set(node.instanceArn, structuredClone(node));
    return true;
  }

  async updateNode(next: NodeRecord, expectedVersion: number): Promise<NodeRecord> {
    leaseStoreChecks.updateNode(next, expectedVersion);
    await this.enter('updateNode');
    const current = this.nodes.get(next.instanceArn);
    if (!current) throw new NodeNotFoundError(next.instanceArn);
    if (current.version !== expectedVersion) throw new VersionConflictError(next.instanceArn, expectedVersion);
    const written = { ...structuredClone(next), version: expectedVersion + 1 };
    this.nodes.set(next.instanceArn, written);
    return structuredClone(written);
  }

  private readonly passMarkers = new Map<string, { owner: string; untilMs: number }>();

  async acquirePassMarker(instanceArn: string, owner: string, nowMs: number, ttlMs: number): Promise<boolean> {
    leaseStoreChecks.acquirePassMarker(instanceArn, owner, nowMs, ttlMs);
    await tick();
    const held = this.passMarkers.get(instanceArn);
    if (held && held.untilMs >= nowMs && held.owner !== owner) return false;
    this.passMarkers.set(instanceArn, { owner, untilMs: nowMs + ttlMs });
    return true;
  }

  async releasePassMarker(instanceArn: string, owner: string): Promise<void> {
    leaseStoreChecks.releasePassMarker(instanceArn, owner);
    await tick();
    if (this.passMarkers.get(instanceArn)?.owner === owner) this.passMarkers.delete(instanceArn);
  }

  async listNodes(): Promise<NodeRecord[]> {
    leaseStoreChecks.listNodes();
    await this.enter('listNodes');
    return [...this.nodes.values()]
      .map((n) => structuredClone(n))
      .sort((a, b) => a.instanceArn.localeCompare(b.instanceArn));
  }

  /** The node index's order (shard, then ARN), consistent here: the fake has no index lag to model. */
  async listNodeRefs(from: NodeCursor = { shard: 0 }, limit = 1000): Promise<NodeRefPage> {
    leaseStoreChecks.listNodeRefs(from, limit);
    await this.enter('listNodes');
    const shards = nodeIndexShards();
    const ordered = [...this.nodes.values()]
      .map((n) => ({ shard: shards.indexOf(nodeIndexShard(n.instanceArn)), n }))
      .filter(({ shard, n }) => shard > from.shard || (shard === from.shard && n.instanceArn > (from.afterArn ?? '')))
      .sort((a, b) => a.shard - b.shard || a.n.instanceArn.localeCompare(b.n.instanceArn));
    const page = ordered.slice(0, limit);
    const refs = page.map(({ n }) => ({
      instanceArn: n.instanceArn,
      instanceId: n.instanceId,
      phase: n.phase,
      createdAtMs: n.createdAtMs,
      updatedAtMs: n.updatedAtMs,
      ...(n.goneSeenAtMs !== undefined ? { goneSeenAtMs: n.goneSeenAtMs } : {}),
      version: n.version,
    }));
    const last = page.at(-1);
    if (ordered.length <= limit || !last) return { refs };
    return { refs, next: { shard: last.shard, afterArn: last.n.instanceArn } };
  }

  private partition(instanceArn: string): Map<string, Lease> {
    let partition = this.leases.get(instanceArn);
    if (!partition) {
      partition = new Map();
      this.leases.set(instanceArn, partition);
    }
    return partition;
  }

  private held(instanceArn: string, holder: HolderRef, family?: IpFamily): Lease | undefined {
    for (const lease of this.leases.get(instanceArn)?.values() ?? []) {
      if (lease.state === 'CLAIMED' && lease.holder && sameHolder(lease.holder, holder) && matches(lease, { family }))
        return lease;
    }
    return undefined;
  }

  private write(lease: Lease): Lease {
    const written = { ...lease, version: lease.version + 1 };
    this.partition(lease.instanceArn).set(lease.ip, written);
    return written;
  }

  /** Every call is asynchronous like the real store's, and takes an injected failure if one is due. */
  private async enter(operation: Operation): Promise<void> {
    await tick();
    const fault = this.faults.find((f) => f.operation === operation && f.remaining > 0);
    if (fault) {
      fault.remaining -= 1;
      throw fault.error;
    }
  }
}

function tick(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** ClaimOptions' narrowing, as DynamoLeaseStore's filter expression applies it. */
function matches(lease: Lease, only: { readonly family?: IpFamily; readonly eniId?: string }): boolean {
  return (
    (!only.family || ipFamilyOf(lease.ip) === only.family) && (only.eniId === undefined || lease.eniId === only.eniId)
  );
}
