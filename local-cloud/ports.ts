/**
 * The in-process boundary between the local cloud's simulators. The EC2 simulator implements
 * `Ec2SimulatorApi`; the Auto Scaling simulator launches and terminates instances through it and IMDS reads
 * an instance's interfaces from it — the same state the EC2 Query API serves, so every view agrees.
 */
export type SimInstanceState = 'pending' | 'running' | 'shutting-down' | 'terminated' | 'stopping' | 'stopped';

export interface SimInstance {
  readonly instanceId: string;
  readonly instanceType: string;
  readonly state: SimInstanceState;
  readonly availabilityZone: string;
  readonly region: string;
  readonly accountId: string;
  readonly vpcId: string;
  readonly subnetId: string;
  readonly imageId: string;
  readonly privateIpAddress: string;
  readonly launchTimeMs: number;
  readonly tags: Readonly<Record<string, string>>;
  /** Auto-assigned public IPv4; absent when the launch had more than one ENI (EC2 then assigns none). */
  readonly publicIpAddress?: string;
}

export interface SimInterface {
  readonly eniId: string;
  readonly deviceIndex: number;
  readonly networkCardIndex: number;
  readonly mac: string;
  readonly subnetId: string;
  readonly subnetCidr: string;
  readonly vpcId: string;
  readonly vpcCidrs: readonly string[];
  /** Primary first. */
  readonly privateIpAddresses: readonly string[];
  readonly ipv4Prefixes: readonly string[];
  readonly attachmentState: 'attaching' | 'attached' | 'detaching';
  readonly deleteOnTermination: boolean;
}

/** One entry of RunInstances' (or a launch template's) NetworkInterfaces: an ENI EC2 creates and attaches at launch. */
export interface LaunchInterfaceSpec {
  readonly deviceIndex: number;
  readonly networkCardIndex?: number;
  /** Default: the instance's subnet (what Auto Scaling does with a template ENI that names none). */
  readonly subnetId?: string;
  readonly secondaryPrivateIpAddressCount?: number;
  readonly ipv4PrefixCount?: number;
  /** IPv6: addresses or /80 prefixes, by count or explicitly (one kind per interface, as EC2 allows). */
  readonly ipv6AddressCount?: number;
  readonly ipv6Addresses?: readonly string[];
  readonly ipv6PrefixCount?: number;
  readonly ipv6Prefixes?: readonly string[];
  readonly groupIds?: readonly string[];
  /** Default true, as for every ENI created at launch. */
  readonly deleteOnTermination?: boolean;
  readonly associatePublicIpAddress?: boolean;
  readonly description?: string;
}

export interface LaunchRequest {
  readonly instanceType: string;
  readonly subnetId: string;
  readonly securityGroupIds?: readonly string[];
  readonly imageId?: string;
  readonly tags?: Readonly<Record<string, string>>;
  /** Extra ENIs (device index ≥ 1), and optionally the boot ENI's own settings at device index 0. */
  readonly networkInterfaces?: readonly LaunchInterfaceSpec[];
  /** TagSpecifications of ResourceType network-interface: EC2 puts them on every ENI the launch creates. */
  readonly networkInterfaceTags?: Readonly<Record<string, string>>;
}

/** What a launch template (CreateLaunchTemplate) declares, as far as the simulator launches from it. */
export interface SimLaunchTemplate {
  readonly launchTemplateId: string;
  readonly launchTemplateName: string;
  readonly instanceType?: string;
  readonly networkInterfaces: readonly LaunchInterfaceSpec[];
  readonly networkInterfaceTags: Readonly<Record<string, string>>;
}

export interface InstanceStateChange {
  readonly instanceId: string;
  readonly previousState: SimInstanceState | undefined;
  readonly state: SimInstanceState;
  readonly atMs: number;
}

export interface Ec2SimulatorApi {
  readonly region: string;
  readonly accountId: string;
  /** Same rules as RunInstances (instance type known, subnet has room); the boot ENI is device index 0. */
  launchInstance(request: LaunchRequest): SimInstance;
  /** Same effects as TerminateInstances (DeleteOnTermination ENIs deleted, others detached). */
  terminateInstance(instanceId: string): void;
  getInstance(instanceId: string): SimInstance | undefined;
  /** Attached and attaching interfaces of an instance, ordered by device index. */
  instanceInterfaces(instanceId: string): SimInterface[];
  /** A launch template by id or name (undefined when unknown: Auto Scaling then falls back to its own default). */
  launchTemplate(spec: { readonly id?: string; readonly name?: string }): SimLaunchTemplate | undefined;
  /** Every instance state transition, in order; returns an unsubscribe function. */
  onInstanceStateChange(listener: (change: InstanceStateChange) => void): () => void;
}

/**
 * What `startEc2Simulator` (local-cloud/ec2/index.ts) returns: the Query-protocol endpoint for
 * `AWS_ENDPOINT_URL_EC2`, the in-process API the other simulators use, and shutdown.
 */
export interface Ec2SimulatorHandle {
  readonly endpoint: string;
  readonly api: Ec2SimulatorApi;
  close(): Promise<void>;
}
