/**
 * A lease is one VPC address on one pod ENI of one instance, recorded in the node's own partition.
 *
 *   FREE ──claim──► CLAIMED ──release──► COOLDOWN ──(reusableAtMs passes)──► claimable again
 *   FREE ──markReleasing (pool-manager only)──► RELEASING ──Unassign──► deleted
 *
 * A node never claims RELEASING: only FREE and COOLDOWN leases carry the claimable-index key.
 */
export const LEASE_STATES = ['FREE', 'CLAIMED', 'COOLDOWN', 'RELEASING'] as const;
export type LeaseState = (typeof LEASE_STATES)[number];

/** Who holds a CLAIMED lease: the CNI attachment (containerId, ifName) plus context for operators. */
/**
 * The longest container id vpc-lease records. The CNI spec bounds none (runtimes use 64 hex characters): the
 * node refuses a longer one (CNI code 4) and the control plane holds a lease's id to the same bound.
 */
export const MAX_CONTAINER_ID_CHARS = 4096;

export interface LeaseHolder {
  readonly containerId: string;
  readonly ifName: string;
  readonly netns: string;
  readonly podNamespace?: string;
  readonly podName?: string;
  /** The CNI network (netconf `name`) that claimed it: GC releases only its own network's attachments. */
  readonly network?: string;
}

/** Where an address lives: everything the node needs to wire a pod without calling EC2. */
export interface LeasePlacement {
  readonly eniId: string;
  readonly deviceIndex: number;
  /** Lower-case, colon separated, as the kernel prints it. */
  readonly mac: string;
  readonly subnetId: string;
  readonly subnetCidr: string;
  /** The VPC router of the subnet: its network address + 1. */
  readonly gateway: string;
  /** The delegated /28 this address belongs to, when the ENI uses prefix delegation. */
  readonly prefix?: string;
}

export interface Lease extends LeasePlacement {
  readonly instanceArn: string;
  readonly ip: string;
  readonly state: LeaseState;
  readonly holder?: LeaseHolder;
  readonly createdAtMs: number;
  readonly claimedAtMs?: number;
  readonly releasedAtMs?: number;
  /** FREE and COOLDOWN only: the lease may be claimed once the clock reaches this. */
  readonly reusableAtMs?: number;
  /** Bumped on every write; conditional writes compare it. */
  readonly version: number;
}

/** What the control plane writes for a freshly assigned address. */
export interface NewLease extends LeasePlacement {
  readonly instanceArn: string;
  readonly ip: string;
}

export function isClaimable(lease: Pick<Lease, 'state' | 'reusableAtMs'>, nowMs: number): boolean {
  return (lease.state === 'FREE' || lease.state === 'COOLDOWN') && (lease.reusableAtMs ?? 0) <= nowMs;
}

export function sameHolder(
  a: Pick<LeaseHolder, 'containerId' | 'ifName'>,
  b: Pick<LeaseHolder, 'containerId' | 'ifName'>,
): boolean {
  return a.containerId === b.containerId && a.ifName === b.ifName;
}
