import type { InstanceLimits } from '../domain/limits.js';

/**
 * The narrow EC2 port of the control plane, in domain types (cilium's `pkg/aws/ec2` shape): the SDK adapter
 * (`sdk-ec2.ts`) converts wire shapes at the edge, so planners and executors never see an SDK type.
 * Every method rejects with an `Ec2ApiError` (errors.ts) classified by AWS error code.
 */
export type AttachmentStatus = 'attaching' | 'attached' | 'detaching' | 'detached';

export interface Ec2Attachment {
  readonly attachmentId: string;
  readonly instanceId: string;
  readonly deviceIndex: number;
  readonly networkCardIndex: number;
  readonly status: AttachmentStatus;
  readonly deleteOnTermination: boolean;
}

export interface Ec2Eni {
  readonly eniId: string;
  readonly subnetId: string;
  readonly vpcId: string;
  readonly availabilityZone: string;
  /** Lower-case, colon separated. */
  readonly mac: string;
  readonly primaryIp: string;
  readonly secondaryIps: readonly string[];
  readonly prefixes: readonly string[];
  /** IPv6 addresses (canonical) and delegated /80s; absent when the ENI has none. */
  readonly ipv6Addresses?: readonly string[];
  readonly ipv6Prefixes?: readonly string[];
  /** `available`, `in-use`, `attaching`, … as EC2 reports it. */
  readonly status: string;
  readonly attachment?: Ec2Attachment;
  readonly securityGroupIds: readonly string[];
  readonly tags: Readonly<Record<string, string>>;
}

export interface Ec2Instance {
  readonly instanceId: string;
  readonly instanceType: string;
  /** `pending`, `running`, `shutting-down`, `terminated`, … */
  readonly state: string;
  readonly availabilityZone: string;
  readonly vpcId: string;
  readonly subnetId: string;
  /** Attached (and attaching) interfaces, boot ENI included, by device index. */
  readonly interfaces: readonly Ec2Eni[];
  /** The instance's tags: a launch without a hook is provisioned only with the cluster tag. */
  readonly tags?: Readonly<Record<string, string>>;
}

export interface Ec2Subnet {
  readonly subnetId: string;
  readonly vpcId: string;
  readonly cidr: string;
  /** The subnet's IPv6 CIDR (canonical), when it has one: what IPv6 leases name as their subnet. */
  readonly ipv6Cidr?: string;
  readonly availabilityZone: string;
  readonly availableIpCount: number;
  readonly tags: Readonly<Record<string, string>>;
}

export interface SubnetQuery {
  readonly subnetIds?: readonly string[];
  /** Every tag must match. */
  readonly tags?: Readonly<Record<string, string>>;
  readonly vpcId?: string;
  readonly availabilityZone?: string;
}

export interface EniQuery {
  /**
   * By id list: all or nothing (an id EC2 does not show yet fails the whole call with NotFound). EC2 refuses
   * MaxResults beside ids, so such a call is always unpaginated and draws on the smaller bucket.
   */
  readonly eniIds?: readonly string[];
  /**
   * The same ENIs through the `network-interface-id` filter, paginated: EC2's standard DescribeNetworkInterfaces
   * bucket (100 tokens at 20/s, not 50 at 10/s), and an id EC2 does not show (yet) is simply absent. What a
   * caller polling its own ENIs at scale wants; an empty list answers nothing without a call.
   */
  readonly filterEniIds?: readonly string[];
  /** ENIs attached to this instance. */
  readonly attachedTo?: string;
  /**
   * ENIs attached to any of these instances, through one `attachment.instance-id` filter per FILTER_VALUES_MAX
   * ids: what a batch of launches needs in one call instead of one each. An empty list answers nothing without a call.
   */
  readonly attachedToAny?: readonly string[];
  /** ENIs in these subnets, whoever owns them (what fills a subnet: `vpc-lease subnets`). */
  readonly subnetIds?: readonly string[];
  /** Every tag must match (`tag:<key>` filters). */
  readonly tags?: Readonly<Record<string, string>>;
}

export interface CreateEniRequest {
  readonly subnetId: string;
  readonly securityGroupIds: readonly string[];
  /** Secondary addresses (EC2 picks them). */
  readonly ipCount: number;
  /** /28 prefixes (prefix delegation). */
  readonly prefixCount: number;
  /** IPv6 /80 prefixes (`ipv6` and `dual` pods); absent or 0 for none. */
  readonly ipv6PrefixCount?: number;
  readonly tags: Readonly<Record<string, string>>;
  /** Idempotency: the same token with the same parameters returns the same ENI. */
  readonly clientToken: string;
  readonly description?: string;
}

export interface AttachEniRequest {
  readonly eniId: string;
  readonly instanceId: string;
  readonly deviceIndex: number;
  readonly networkCardIndex: number;
}

export interface Ec2Port {
  /** undefined when EC2 does not know the instance (or not yet). */
  describeInstance(instanceId: string): Promise<Ec2Instance | undefined>;
  describeInstanceLimits(instanceType: string): Promise<InstanceLimits>;
  describeSubnets(query: SubnetQuery): Promise<Ec2Subnet[]>;
  describeNetworkInterfaces(query: EniQuery): Promise<Ec2Eni[]>;
  createNetworkInterface(request: CreateEniRequest): Promise<Ec2Eni>;
  /** Returns the attachment id. */
  attachNetworkInterface(request: AttachEniRequest): Promise<string>;
  setDeleteOnTermination(eniId: string, attachmentId: string, deleteOnTermination: boolean): Promise<void>;
  detachNetworkInterface(attachmentId: string, force?: boolean): Promise<void>;
  deleteNetworkInterface(eniId: string): Promise<void>;
  assignPrivateIpAddresses(
    eniId: string,
    request: { readonly ipCount?: number; readonly prefixCount?: number },
  ): Promise<{ ips: string[]; prefixes: string[] }>;
  unassignPrivateIpAddresses(
    eniId: string,
    request: { readonly ips?: readonly string[]; readonly prefixes?: readonly string[] },
  ): Promise<void>;
  /** Adds or overwrites tags (the reconciler's two-pass mark). Up to 1000 resources per call. */
  createTags(resourceIds: readonly string[], tags: Readonly<Record<string, string>>): Promise<void>;
  deleteTags(resourceIds: readonly string[], keys: readonly string[]): Promise<void>;
  /**
   * instanceId → state name for every instance EC2 knows, in bulk (one call per 200 ids instead of one per
   * node); unknown ids are simply absent instead of failing the call.
   */
  describeInstanceStates(instanceIds: readonly string[]): Promise<Map<string, string>>;
  /**
   * The instances EC2 knows among `instanceIds`, in as few calls as the API allows (one per 200 ids), e.g.
   * every launch of one Lambda invocation at once; unknown ids are absent instead of failing the call.
   */
  describeInstances(instanceIds: readonly string[]): Promise<Map<string, Ec2Instance>>;
}

/** EC2 actions that change state: they go through the client-side concurrency cap. */
export const MUTATING_ACTIONS = new Set([
  'CreateNetworkInterface',
  'AttachNetworkInterface',
  'ModifyNetworkInterfaceAttribute',
  'DetachNetworkInterface',
  'DeleteNetworkInterface',
  'AssignPrivateIpAddresses',
  'UnassignPrivateIpAddresses',
  'CreateTags',
  'DeleteTags',
]);
