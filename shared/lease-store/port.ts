import type { Lease, LeaseHolder, LeaseState, NewLease } from '../domain/lease.js';
import type { NodeRecord } from '../domain/node.js';

/**
 * The lease store port. One real adapter (DynamoDB, `dynamo-lease-store.ts`) and one faithful fake
 * (`memory-lease-store.ts`) pass the same contract suite (`test/lease-store/contract.ts`).
 *
 * Every state change is ONE conditional write on ONE item — no transactions (dynalite has none, and a single
 * conditional write is also the cheapest correct primitive: the storage write *is* the lock, like host-local's
 * O_CREAT|O_EXCL).
 */
export interface LeaseStore {
  /** Writes FREE leases (batched). Existing items are left as they are, so a resumed launch loses nothing. */
  putLeases(leases: readonly NewLease[], nowMs: number): Promise<void>;

  /**
   * Claims one claimable lease for `holder`: one Query on the claimable index, then one conditional update;
   * on losing a race it tries another candidate. When `checkExisting` (the default) it first looks for a lease
   * already CLAIMED by the same (containerId, ifName) and returns it unchanged — ADD is idempotent.
   * @throws NoFreeLeaseError when nothing is claimable; StoreUnavailableError when the store cannot be reached.
   */
  claim(instanceArn: string, holder: LeaseHolder, nowMs: number, options?: ClaimOptions): Promise<Lease>;

  /** The lease CLAIMED by (containerId, ifName) on this node, if any (consistent read). */
  findByHolder(instanceArn: string, containerId: string, ifName: string): Promise<Lease | undefined>;

  /**
   * CLAIMED by this holder → COOLDOWN with reusableAtMs = now + reuseWaitMs. Returns the released lease, or
   * undefined when the holder held nothing (DEL is idempotent). When `ip` is known (from the node's local
   * record) this is one conditional update; otherwise it looks the holder up first.
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
   * `freeSinceBeforeMs` → RELEASING. A node never claims RELEASING.
   * @throws LeaseConflictError when the lease was claimed or changed meanwhile.
   */
  markReleasing(instanceArn: string, ip: string, nowMs: number, freeSinceBeforeMs?: number): Promise<Lease>;

  /** Rolls a RELEASING lease back to FREE (when Unassign failed for good). Conditional on RELEASING. */
  revertReleasing(instanceArn: string, ip: string, nowMs: number): Promise<Lease>;

  /** The last half: deletes the lease only if it is still RELEASING — never a blind delete. */
  deleteReleasing(instanceArn: string, ip: string): Promise<void>;

  /** Removes every lease and the node item of an instance that is gone (terminate, reconciler). */
  deleteNodePartition(instanceArn: string): Promise<number>;

  getLease(instanceArn: string, ip: string): Promise<Lease | undefined>;

  /** All leases of a node (paginated internally), optionally only those in one state. Consistent read. */
  listLeases(instanceArn: string, filter?: { state?: LeaseState }): Promise<Lease[]>;

  /** How many leases are claimable now, from the claimable index (eventually consistent, cheap). */
  countClaimable(instanceArn: string, nowMs: number): Promise<number>;

  getNode(instanceArn: string): Promise<NodeRecord | undefined>;

  /** Creates the node item; returns false when it already exists (duplicate launch event). */
  createNode(node: NodeRecord): Promise<boolean>;

  /**
   * Writes `next` only if the stored item is still at `expectedVersion`; the stored version becomes
   * expectedVersion + 1, and the written record is returned.
   * @throws VersionConflictError
   */
  updateNode(next: NodeRecord, expectedVersion: number): Promise<NodeRecord>;

  /** Every node item (operators, reconciler, pool schedule — never on a pod's hot path). */
  listNodes(): Promise<NodeRecord[]>;
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
}
