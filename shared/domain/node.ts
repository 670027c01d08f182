import type { InstanceLimits } from './limits.js';

/** What a node's pods get (ControlPlaneConfig.ipFamily): IPv4, IPv6 from one /80 per pod ENI, or one of each. */
export const IP_FAMILY_SETTINGS = ['ipv4', 'ipv6', 'dual'] as const;
export type IpFamilySetting = (typeof IP_FAMILY_SETTINGS)[number];

/**
 *   PENDING → PROVISIONING → READY → DRAINING → GONE
 *        └──────────┴──────► FAILED (reason recorded; launch abandoned)
 */
export const NODE_PHASES = ['PENDING', 'PROVISIONING', 'READY', 'DRAINING', 'GONE', 'FAILED'] as const;
export type NodePhase = (typeof NODE_PHASES)[number];

/**
 * Progress of one pod ENI, recorded on the node item after each EC2 step so a crash, a timeout or a duplicate
 * event resumes where it stopped: PLANNED → CREATED → ATTACHING → ATTACHED → LEASED.
 */
export const ENI_STEPS = ['PLANNED', 'CREATED', 'ATTACHING', 'ATTACHED', 'LEASED', 'DELETING'] as const;
export type EniStep = (typeof ENI_STEPS)[number];

export interface EniRecord {
  readonly deviceIndex: number;
  readonly networkCardIndex: number;
  readonly subnetId: string;
  /** Derived from (instance, device index) so a repeated CreateNetworkInterface returns the same ENI. */
  readonly clientToken: string;
  readonly step: EniStep;
  readonly eniId?: string;
  readonly attachmentId?: string;
  readonly mac?: string;
  readonly subnetCidr?: string;
  /** Secondary addresses (never the ENI's primary address, which stays with the ENI). */
  readonly addresses: readonly string[];
  /** Delegated /28 prefixes, in prefix-delegation mode. */
  readonly prefixes: readonly string[];
  /** The delegated IPv6 /80 (`ipv6` and `dual` nodes), canonical; IPv6 leases are addresses inside it. */
  readonly ipv6Prefixes?: readonly string[];
  /** The subnet's IPv6 CIDR: what an IPv6 lease names as its subnet (its router is the CIDR's base + 1). */
  readonly ipv6SubnetCidr?: string;
  readonly deleteOnTermination?: boolean;
  /**
   * What was asked of EC2 (secondary addresses, /28 prefixes), so a resumed step re-sends the very same
   * request under the same ClientToken without recomputing a plan whose inputs (free addresses) have moved.
   * Absent on records written before a plan existed: read as 0.
   */
  readonly plannedIpCount?: number;
  readonly plannedPrefixCount?: number;
  readonly plannedIpv6PrefixCount?: number;
  /**
   * When a pool pass planned this ENI on a READY node (launch ENIs leave it out and use the node's createdAt):
   * its created-at tag, the salt of its ClientToken (a reused device index must get a new ENI), and the start
   * of the reconciler's minimum age.
   */
  readonly plannedAtMs?: number;
}

/**
 * A pod subnet EC2 refused for this node for lack of room (`InsufficientFreeAddressesInSubnet`, or
 * `InsufficientCidrBlocks` for a /28 in a fragmented subnet), the latest per subnet and code: what
 * `vpc-lease nodes` and an operator read to see which subnet to grow.
 */
export interface SubnetRefusal {
  readonly subnetId: string;
  readonly code: string;
  readonly atMs: number;
}

export interface LifecycleRef {
  readonly autoScalingGroupName: string;
  readonly hookName: string;
  readonly token: string;
}

export interface NodeRecord {
  readonly instanceArn: string;
  readonly instanceId: string;
  readonly instanceType: string;
  readonly availabilityZone: string;
  readonly lifecycle?: LifecycleRef;
  readonly limits?: InstanceLimits;
  readonly podSubnetIds: readonly string[];
  readonly phase: NodePhase;
  /**
   * The address family the launch provisioned this node's pods for; absent on items written before it existed
   * (read as ipv4). The node's ADD refuses a netconf of another family by it.
   */
  readonly ipFamily?: IpFamilySetting;
  readonly failureReason?: string;
  /** Subnets EC2 refused for room while this node's ENIs were planned (see SubnetRefusal). */
  readonly subnetRefusals?: readonly SubnetRefusal[];
  readonly enis: readonly EniRecord[];
  /**
   * kubelet's max-pods for this node (planner maxPodsFor, the figure `vpc-lease max-pods` and
   * `vpc-lease-cni max-pods` print), fixed when the launch is planned; the pool never leases past it. 0 until then.
   */
  readonly maxPods: number;
  /** When the launch began: the first launch event's node item, which is also when the hook started holding. */
  readonly createdAtMs: number;
  readonly updatedAtMs: number;
  /**
   * When the launch completed its lifecycle action (CONTINUE or ABANDON): with createdAtMs, how long the hook
   * held the instance. Absent while it is held, after a hook-less launch, or when another invocation completed it.
   */
  readonly hookCompletedAtMs?: number;
  /**
   * When the reconciler first saw the instance gone from EC2 (terminated or unknown). The partition is
   * removed only by a later pass that still sees it gone, a minimum age after this mark — never on one
   * DescribeInstances snapshot, which may lag (eventual consistency). Cleared when the instance reappears.
   */
  readonly goneSeenAtMs?: number;
  /** Optimistic concurrency: every update is conditional on the version it read. */
  readonly version: number;
}
