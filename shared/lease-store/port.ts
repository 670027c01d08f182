import type { Lease, LeaseHolder, LeaseState, NewLease } from '../domain/lease.js';
import type { NodeRecord } from '../domain/node.js';
import type { IpFamily } from '../ipv6.js';

/**
 * The lease store port. One real adapter (DynamoDB, `dynamo-lease-store.ts`) and one faithful fake
 * (`test/support/memory-lease-store.ts`) pass the same contract suite (`test/lease-store/contract.ts`).
 *
 * Every state change is ONE conditional write on ONE item — no transactions (dynalite has none, and a single
 * conditional write is also the cheapest correct primitive: the storage write *is* the lock, like host-local's
 * O_CREAT|O_EXCL).
 */
export interface LeaseStore {
  /**
   * Writes FREE leases, claimable from `nowMs`. Existing items are left as they are (a conditional put per
   * lease, never BatchWriteItem's blind overwrite), so a resumed launch loses nothing and never resets a
   * CLAIMED lease. The whole batch is validated first: one bad lease → ValidationError and nothing written.
   */
  putLeases(leases: readonly NewLease[], nowMs: number): Promise<void>;

  /**
   * Claims one claimable lease for `holder`: one Query on the claimable index, then one conditional update;
   * on losing a race it tries another candidate. When `checkExisting` (the default) it first looks for a lease
   * already CLAIMED by the same (containerId, ifName) and returns it unchanged — ADD is idempotent. The store
   * cannot stop two *concurrent* first ADDs of the same pair from claiming two leases (no unique index); the
   * runtime serialises a container's ADDs, and CNI GC releases anything left over.
   * @throws NoFreeLeaseError when nothing is claimable; LeaseConflictError after `maxAttempts` lost races;
   *   StoreUnavailableError when the store cannot be reached; ValidationError on a bad ARN or empty holder ids.
   */
  claim(instanceArn: string, holder: LeaseHolder, nowMs: number, options?: ClaimOptions): Promise<Lease>;

  /**
   * The lease CLAIMED by (containerId, ifName) on this node, if any (consistent read); with `family`, only a
   * lease of that family (a dual-stack pod holds one of each).
   */
  findByHolder(instanceArn: string, containerId: string, ifName: string, family?: IpFamily): Promise<Lease | undefined>;

  /**
   * CLAIMED by this holder → COOLDOWN with reusableAtMs = now + reuseWaitMs. Returns the released lease, or
   * undefined when the holder held nothing (DEL is idempotent). When `ip` is known (from the node's local
   * record) this is one conditional update; otherwise it looks the holder up first. With a wrong `ip` the
   * condition fails and nothing is released (undefined): a lease is only ever released by its own holder.
   * The holder is removed from the lease; claimedAtMs stays as history.
   */
  release(
    instanceArn: string,
    holder: HolderRef,
    nowMs: number,
    reuseWaitMs: number,
    ip?: string,
  ): Promise<Lease | undefined>;

  /**
   * The first half of the release handshake (pool-manager): FREE (or COOLDOWN) and unchanged since
   * `freeSinceBeforeMs` → RELEASING. "Unchanged since" means claimable since: reusableAtMs <= freeSinceBeforeMs.
   * A node never claims RELEASING. releasedAtMs becomes `nowMs` (when the handshake began), and a retry with
   * the same `nowMs` succeeds again, so a lost response cannot strand the lease.
   * @throws LeaseConflictError (carrying the current lease) when the lease was claimed or changed meanwhile;
   *   LeaseNotFoundError when there is no such lease.
   */
  markReleasing(instanceArn: string, ip: string, nowMs: number, freeSinceBeforeMs?: number): Promise<Lease>;

  /** Rolls a RELEASING lease back to FREE, claimable from `nowMs` (when Unassign failed for good). Conditional on RELEASING. */
  revertReleasing(instanceArn: string, ip: string, nowMs: number): Promise<Lease>;

  /**
   * The last half: deletes the lease only if it is still RELEASING — never a blind delete. A lease that is
   * already gone counts as deleted (a retried handshake). @throws LeaseConflictError when it is not RELEASING.
   */
  deleteReleasing(instanceArn: string, ip: string): Promise<void>;

  /** Removes every lease and the node item of an instance that is gone (terminate, reconciler); returns how many items. */
  deleteNodePartition(instanceArn: string): Promise<number>;

  getLease(instanceArn: string, ip: string): Promise<Lease | undefined>;

  /**
   * All leases of a node (paginated internally), optionally only those in one state. Consistent read unless
   * `eventual`: half the read units, and a write of the last second or so may not show (a first look only).
   */
  listLeases(instanceArn: string, filter?: { state?: LeaseState; eventual?: boolean }): Promise<Lease[]>;

  /** How many leases are claimable now, from the claimable index (eventually consistent, cheap). */
  countClaimable(instanceArn: string, nowMs: number): Promise<number>;

  /** Consistent read unless `eventual` (half the read units; a first look only, as for listLeases). */
  getNode(instanceArn: string, read?: { eventual?: boolean }): Promise<NodeRecord | undefined>;

  /** Creates the node item with `node.version` as given; returns false when it already exists (duplicate launch event). */
  createNode(node: NodeRecord): Promise<boolean>;

  /**
   * Writes `next` only if the stored item is still at `expectedVersion`; the stored version becomes
   * expectedVersion + 1, and the written record is returned.
   * @throws VersionConflictError; NodeNotFoundError when there is no node item.
   */
  updateNode(next: NodeRecord, expectedVersion: number): Promise<NodeRecord>;

  /**
   * Takes the node's assignment-pass marker for `owner` until `nowMs + ttlMs`: one conditional write on the
   * node's `pass` item, which succeeds only when no other owner holds an unexpired marker. Returns false when
   * another pass holds it. The item's expiry attribute is not node-writable, so a node can neither hold nor
   * forge it.
   */
  acquirePassMarker(instanceArn: string, owner: string, nowMs: number, ttlMs: number): Promise<boolean>;

  /** Gives the marker back if `owner` still holds it (a no-op otherwise: it expired and another took it). */
  releasePassMarker(instanceArn: string, owner: string): Promise<void>;

  /**
   * Every node item, consistent (operators, the invariant checker): the node index's refs, then one GetItem
   * per node. Never a Scan, never a lease item read.
   */
  listNodes(): Promise<NodeRecord[]>;

  /**
   * One page of node refs from the node index, in (shard, instance ARN) order, from `from` on: what the
   * schedules decide on, ~150 bytes a node. Eventually consistent (a GSI cannot be read consistently): a node
   * created a moment ago may be missing and a phase may lag, so callers act only after `getNode`.
   * `next` is absent once the last shard is done.
   */
  listNodeRefs(from?: NodeCursor, limit?: number): Promise<NodeRefPage>;
}

/** What the node index projects of a node item. */
export type NodeRef = Pick<
  NodeRecord,
  'instanceArn' | 'instanceId' | 'phase' | 'createdAtMs' | 'updatedAtMs' | 'goneSeenAtMs' | 'version'
>;

/** Where a walk of the node index stands: the shard (0-based) and the last instance ARN read in it. */
export interface NodeCursor {
  readonly shard: number;
  readonly afterArn?: string;
}

export interface NodeRefPage {
  readonly refs: readonly NodeRef[];
  readonly next?: NodeCursor;
}

export interface HolderRef {
  readonly containerId: string;
  readonly ifName: string;
}

export interface ClaimOptions {
  /** Look for a lease already held by the same (containerId, ifName) first. Default true. */
  readonly checkExisting?: boolean;
  /** How many candidates to read from the claimable index per attempt. Default 16. */
  readonly candidates?: number;
  /** Conditional-write losses tolerated before giving up with LeaseConflictError. Default 8. */
  readonly maxAttempts?: number;
  /**
   * Only leases of this family (read from the address), also for `checkExisting`. Absent: any lease, which on an
   * IPv4-only node (the default) is every lease it has.
   */
  readonly family?: IpFamily;
  /** Only leases on this ENI: a dual-stack pod's second lease must sit on the ENI of its first. */
  readonly eniId?: string;
}
