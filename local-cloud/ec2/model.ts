import type { SimInstanceState } from '../ports.js';
import type { Ipv6SubnetPool } from './ipv6-pool.js';
import type { SubnetPool } from './subnet-pool.js';

/** The simulator's records. Mutable on purpose: all changes happen synchronously inside one request. */
export type Tags = Map<string, string>;

export interface VpcRecord {
  readonly vpcId: string;
  readonly cidrBlock: string;
  /** The Amazon-provided /56, when the VPC has one. */
  readonly ipv6CidrBlock?: string;
  readonly tags: Tags;
}

export interface SubnetRecord {
  readonly subnetId: string;
  readonly vpcId: string;
  readonly cidrBlock: string;
  readonly availabilityZone: string;
  readonly availabilityZoneId: string;
  readonly pool: SubnetPool;
  /** The subnet's /64 inside the VPC's /56 and its accounting, when it has one. */
  readonly ipv6?: Ipv6SubnetPool;
  readonly tags: Tags;
  /** ModifySubnetAttribute MapPublicIpOnLaunch: a launch with ONE network interface gets a public IPv4. */
  mapPublicIpOnLaunch: boolean;
}

export interface SecurityGroupRecord {
  readonly groupId: string;
  readonly groupName: string;
  readonly description: string;
  readonly vpcId: string;
  readonly tags: Tags;
}

export type AttachmentStatus = 'attaching' | 'attached' | 'detaching';

export interface AttachmentRecord {
  readonly attachmentId: string;
  readonly instanceId: string;
  readonly deviceIndex: number;
  readonly networkCardIndex: number;
  readonly attachTimeMs: number;
  status: AttachmentStatus;
  deleteOnTermination: boolean;
}

export interface EniRecord {
  readonly eniId: string;
  readonly subnetId: string;
  readonly vpcId: string;
  readonly availabilityZone: string;
  readonly mac: string;
  description: string;
  /** Primary first. */
  privateIps: string[];
  /** Delegated /28 prefixes. */
  prefixes: string[];
  /** IPv6 addresses (canonical) and delegated /80 prefixes; none unless the subnet has a /64. */
  ipv6Addresses: string[];
  ipv6Prefixes: string[];
  groupIds: string[];
  sourceDestCheck: boolean;
  readonly tags: Tags;
  attachment: AttachmentRecord | undefined;
  /** Eventual consistency: Describe answers NotFound for it until this real time. */
  readonly visibleAtMs: number;
  readonly createdAtMs: number;
}

export interface InstanceRecord {
  readonly instanceId: string;
  readonly reservationId: string;
  readonly instanceType: string;
  state: SimInstanceState;
  readonly subnetId: string;
  readonly vpcId: string;
  readonly availabilityZone: string;
  readonly imageId: string;
  readonly privateIp: string;
  readonly bootEniId: string;
  readonly groupIds: readonly string[];
  readonly launchTimeMs: number;
  readonly tags: Tags;
  readonly visibleAtMs: number;
  stateReason: string | undefined;
  readonly publicIp?: string;
}

export const INSTANCE_STATE_CODES: Record<SimInstanceState, number> = {
  pending: 0,
  running: 16,
  'shutting-down': 32,
  terminated: 48,
  stopping: 64,
  stopped: 80,
};
