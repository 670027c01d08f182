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

export interface LaunchRequest {
  readonly instanceType: string;
  readonly subnetId: string;
  readonly securityGroupIds?: readonly string[];
  readonly imageId?: string;
  readonly tags?: Readonly<Record<string, string>>;
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
  /** Every instance state transition, in order; returns an unsubscribe function. */
  onInstanceStateChange(listener: (change: InstanceStateChange) => void): () => void;
}

/**
 * What `startEc2Simulator` (infra/local/ec2/index.ts) returns: the Query-protocol endpoint for
 * `AWS_ENDPOINT_URL_EC2`, the in-process API the other simulators use, and shutdown.
 */
export interface Ec2SimulatorHandle {
  readonly endpoint: string;
  readonly api: Ec2SimulatorApi;
  close(): Promise<void>;
}
