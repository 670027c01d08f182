import type { InstanceLimits } from '../../shared/domain/limits.js';
import { parseCidr } from '../../shared/ipv4.js';
import { ipv6Within, nthSubPrefix, parseIpv6Cidr } from '../../shared/ipv6.js';
import type { InstanceStateChange, SimInstanceState, SimLaunchTemplate } from '../ports.js';
import { Ec2ApiError, notFound } from './errors.js';
import { Ipv6SubnetPool } from './ipv6-pool.js';
import type { EniRecord, InstanceRecord, SecurityGroupRecord, SubnetRecord, Tags, VpcRecord } from './model.js';
import type { SeededRandom } from './random.js';
import { SubnetPool } from './subnet-pool.js';
import type { Timeline } from './timeline.js';

/** Durations of AWS-side state changes, in AWS milliseconds (scaled by the timeline). */
export interface Ec2Delays {
  /** AttachNetworkInterface: attaching → attached. */
  readonly attachMs: number;
  /** DetachNetworkInterface: detaching → gone. */
  readonly detachMs: number;
  /** RunInstances: pending → running. */
  readonly instancePendingMs: number;
  /** TerminateInstances: shutting-down → terminated (ENIs deleted/detached then). */
  readonly instanceShutdownMs: number;
  /** A new ENI or instance answers NotFound to Describe by id for this long (0 = off). */
  readonly eventualConsistencyMs: number;
}

export interface WorldConfig {
  readonly region: string;
  readonly accountId: string;
  readonly random: SeededRandom;
  readonly timeline: Timeline;
  readonly instanceTypes: ReadonlyMap<string, InstanceLimits>;
  delays: Ec2Delays;
  /**
   * Where the eventual-consistency window applies: `describe` (Describe calls only) or `all` (also mutating
   * calls naming the new ENI or instance, e.g. an Attach right after Create — which EC2 can also refuse).
   */
  consistencyScope: 'describe' | 'all';
}

/**
 * The simulated account in one region: VPCs, subnets, security groups, instances and ENIs, with the rules that
 * involve more than one ENI (instance lifecycle, tags, id lookups). ENI operations live in `enis.ts`.
 */
export class Ec2World {
  readonly vpcs = new Map<string, VpcRecord>();
  readonly subnets = new Map<string, SubnetRecord>();
  readonly groups = new Map<string, SecurityGroupRecord>();
  readonly instances = new Map<string, InstanceRecord>();
  readonly enis = new Map<string, EniRecord>();
  readonly launchTemplates = new Map<string, SimLaunchTemplate>();
  /** Public IPv4s come from a counter, not the seeded stream, so enabling them does not move other ids. */
  private publicIps = 0;
  /** Amazon-provided /56s come from a counter too, for the same reason. */
  private ipv6Blocks = 0;
  private readonly listeners = new Set<(change: InstanceStateChange) => void>();
  private attachmentsPaused = false;
  private readonly heldProgress: (() => void)[] = [];
  private maxIpv4PerEni: number | undefined;

  constructor(readonly config: WorldConfig) {}

  get random(): SeededRandom {
    return this.config.random;
  }
  get timeline(): Timeline {
    return this.config.timeline;
  }

  limitsOf(instanceType: string): InstanceLimits {
    const limits = this.config.instanceTypes.get(instanceType);
    if (!limits) throw new Ec2ApiError('InvalidParameterValue', `Invalid value '${instanceType}' for InstanceType.`);
    return limits;
  }

  /** The most addresses an ENI may hold while unattached: the largest IPv4-per-ENI of any type. */
  maxIpv4PerEniAnyType(): number {
    if (this.maxIpv4PerEni === undefined) {
      let max = 1;
      for (const limits of this.config.instanceTypes.values()) max = Math.max(max, limits.ipv4PerEni);
      this.maxIpv4PerEni = max;
    }
    return this.maxIpv4PerEni;
  }

  /** `amazonIpv6`: CreateVpc's AmazonProvidedIpv6CidrBlock, a /56 from Amazon's pool. */
  createVpc(cidrBlock: string, amazonIpv6 = false): VpcRecord {
    const cidr = parseCidrOrThrow(cidrBlock);
    if (cidr.prefixLength < 16 || cidr.prefixLength > 28) {
      throw new Ec2ApiError('InvalidVpc.Range', `The CIDR '${cidrBlock}' is invalid.`);
    }
    const vpc: VpcRecord = {
      vpcId: this.random.id('vpc'),
      cidrBlock,
      ...(amazonIpv6 ? { ipv6CidrBlock: nthSubPrefix('2600:1f18::/32', 56, this.ipv6Blocks++) } : {}),
      tags: new Map(),
    };
    this.vpcs.set(vpc.vpcId, vpc);
    return vpc;
  }

  createSubnet(vpcId: string, cidrBlock: string, availabilityZone?: string, ipv6CidrBlock?: string): SubnetRecord {
    const vpc = this.vpc(vpcId);
    const cidr = parseCidrOrThrow(cidrBlock);
    const vpcCidr = parseCidr(vpc.cidrBlock);
    const size = 2 ** (32 - cidr.prefixLength);
    const inside =
      cidr.prefixLength >= vpcCidr.prefixLength &&
      cidr.network >= vpcCidr.network &&
      cidr.network + size <= vpcCidr.network + 2 ** (32 - vpcCidr.prefixLength);
    if (!inside || cidr.prefixLength < 16 || cidr.prefixLength > 28) {
      throw new Ec2ApiError('InvalidSubnet.Range', `The CIDR '${cidrBlock}' is invalid.`);
    }
    for (const other of this.subnets.values()) {
      if (other.vpcId !== vpcId) continue;
      const o = parseCidr(other.cidrBlock);
      const oSize = 2 ** (32 - o.prefixLength);
      if (cidr.network < o.network + oSize && o.network < cidr.network + size) {
        throw new Ec2ApiError('InvalidSubnet.Conflict', `The CIDR '${cidrBlock}' conflicts with another subnet`);
      }
    }
    const az = availabilityZone ?? `${this.config.region}a`;
    if (!az.startsWith(this.config.region) || az.length !== this.config.region.length + 1) {
      throw new Ec2ApiError('InvalidParameterValue', `Value (${az}) for parameter availabilityZone is invalid.`);
    }
    const subnet: SubnetRecord = {
      subnetId: this.random.id('subnet'),
      vpcId,
      cidrBlock,
      availabilityZone: az,
      availabilityZoneId: `use1-az${az.charCodeAt(az.length - 1) - 96}`,
      pool: new SubnetPool(cidrBlock, this.random),
      ...(ipv6CidrBlock !== undefined ? { ipv6: this.ipv6PoolFor(vpc, ipv6CidrBlock) } : {}),
      tags: new Map(),
      mapPublicIpOnLaunch: false,
    };
    this.subnets.set(subnet.subnetId, subnet);
    return subnet;
  }

  /** The next /64 of the VPC's /56 that no subnet holds: what a seeded dual-stack subnet gets. */
  nextIpv6SubnetBlock(vpcId: string): string | undefined {
    const vpc = this.vpc(vpcId);
    if (vpc.ipv6CidrBlock === undefined) return undefined;
    const taken = new Set([...this.subnets.values()].map((s) => s.ipv6?.cidr));
    for (let i = 0; i < 256; i++) {
      const block = nthSubPrefix(vpc.ipv6CidrBlock, 64, i);
      if (!taken.has(block)) return block;
    }
    throw new Ec2ApiError('InvalidSubnet.Conflict', `No free /64 left in ${vpc.ipv6CidrBlock}`);
  }

  private ipv6PoolFor(vpc: VpcRecord, block: string): Ipv6SubnetPool {
    if (vpc.ipv6CidrBlock === undefined) {
      throw new Ec2ApiError('InvalidParameterValue', `The VPC '${vpc.vpcId}' has no IPv6 CIDR block.`);
    }
    let cidr: ReturnType<typeof parseIpv6Cidr>;
    try {
      cidr = parseIpv6Cidr(block);
    } catch {
      throw new Ec2ApiError('InvalidParameterValue', `Value (${block}) for parameter ipv6CidrBlock is invalid.`);
    }
    if (cidr.prefixLength !== 64 || !ipv6Within(vpc.ipv6CidrBlock, block)) {
      throw new Ec2ApiError('InvalidSubnet.Range', `The IPv6 CIDR '${block}' is invalid.`);
    }
    for (const other of this.subnets.values()) {
      if (other.vpcId === vpc.vpcId && other.ipv6 && other.ipv6.network === cidr.network) {
        throw new Ec2ApiError('InvalidSubnet.Conflict', `The IPv6 CIDR '${block}' conflicts with another subnet`);
      }
    }
    return new Ipv6SubnetPool(block, this.random);
  }

  createSecurityGroup(groupName: string, description: string, vpcId: string): SecurityGroupRecord {
    this.vpc(vpcId);
    for (const g of this.groups.values()) {
      if (g.vpcId === vpcId && g.groupName === groupName) {
        throw new Ec2ApiError(
          'InvalidGroup.Duplicate',
          `The security group '${groupName}' already exists for VPC '${vpcId}'`,
        );
      }
    }
    const group: SecurityGroupRecord = {
      groupId: this.random.id('sg'),
      groupName,
      description,
      vpcId,
      tags: new Map(),
    };
    this.groups.set(group.groupId, group);
    return group;
  }

  nextPublicIp(): string {
    this.publicIps += 1;
    return `198.51.${Math.floor(this.publicIps / 256) % 256}.${this.publicIps % 256}`;
  }

  vpc(vpcId: string): VpcRecord {
    const vpc = this.vpcs.get(vpcId);
    if (!vpc) throw notFound('Vpc', vpcId);
    return vpc;
  }
  subnet(subnetId: string): SubnetRecord {
    const subnet = this.subnets.get(subnetId);
    if (!subnet) throw notFound('Subnet', subnetId);
    return subnet;
  }
  instance(instanceId: string): InstanceRecord {
    const instance = this.instances.get(instanceId);
    if (!instance) throw notFound('Instance', instanceId);
    return instance;
  }
  eni(eniId: string): EniRecord {
    if (!/^eni-[0-9a-f]{8,17}$/.test(eniId)) {
      throw new Ec2ApiError('InvalidNetworkInterfaceID.Malformed', `Invalid id: "${eniId}"`);
    }
    const eni = this.enis.get(eniId);
    if (!eni) throw notFound('NetworkInterface', eniId);
    return eni;
  }

  checkGroups(groupIds: readonly string[], vpcId: string): void {
    for (const id of groupIds) {
      const group = this.groups.get(id);
      if (!group) throw notFound('Group', id);
      if (group.vpcId !== vpcId) {
        throw new Ec2ApiError('InvalidParameter', `Security group ${id} and subnet belong to different networks.`);
      }
    }
  }

  /** The tag set of any resource by id, or the resource type's NotFound error. */
  tagsOf(resourceId: string): Tags {
    const kind = resourceId.slice(0, resourceId.lastIndexOf('-'));
    const found =
      this.vpcs.get(resourceId) ??
      this.subnets.get(resourceId) ??
      this.groups.get(resourceId) ??
      this.instances.get(resourceId) ??
      this.enis.get(resourceId);
    if (found) return found.tags;
    switch (kind) {
      case 'eni':
        throw notFound('NetworkInterface', resourceId);
      case 'i':
        throw notFound('Instance', resourceId);
      case 'subnet':
        throw notFound('Subnet', resourceId);
      case 'vpc':
        throw notFound('Vpc', resourceId);
      case 'sg':
        throw notFound('Group', resourceId);
      default:
        throw new Ec2ApiError('InvalidID', `The ID '${resourceId}' is not valid`);
    }
  }

  onInstanceStateChange(listener: (change: InstanceStateChange) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Moves the instance and tells listeners; a launch reports no previous state. */
  setInstanceState(instance: InstanceRecord, state: SimInstanceState, launched = false): void {
    const previousState = launched ? undefined : instance.state;
    instance.state = state;
    const change: InstanceStateChange = {
      instanceId: instance.instanceId,
      previousState,
      state,
      atMs: this.timeline.nowMs(),
    };
    for (const listener of [...this.listeners]) listener(change);
  }

  /** Runs attachment progress now, or when `resumeAttachments` is called if progress is paused. */
  progressAttachment(step: () => void): void {
    if (this.attachmentsPaused) this.heldProgress.push(step);
    else step();
  }

  pauseAttachments(): void {
    this.attachmentsPaused = true;
  }

  resumeAttachments(): void {
    this.attachmentsPaused = false;
    for (const step of this.heldProgress.splice(0)) step();
  }

  /** For mutating calls when the consistency scope is `all`: a too-new ENI/instance is NotFound. */
  requireSettled(ids: {
    eniIds?: readonly (string | undefined)[];
    instanceIds?: readonly (string | undefined)[];
  }): void {
    if (this.config.consistencyScope !== 'all') return;
    const now = this.timeline.nowMs();
    for (const id of ids.eniIds ?? []) {
      const eni = id === undefined ? undefined : this.enis.get(id);
      if (eni && eni.visibleAtMs > now) throw notFound('NetworkInterface', eni.eniId);
    }
    for (const id of ids.instanceIds ?? []) {
      const instance = id === undefined ? undefined : this.instances.get(id);
      if (instance && instance.visibleAtMs > now) throw notFound('Instance', instance.instanceId);
    }
  }

  visibleAt(): number {
    return this.timeline.nowMs() + this.timeline.realMs(this.config.delays.eventualConsistencyMs);
  }
}

function parseCidrOrThrow(text: string): ReturnType<typeof parseCidr> {
  try {
    return parseCidr(text);
  } catch {
    throw new Ec2ApiError('InvalidParameterValue', `Value (${text}) for parameter cidrBlock is invalid.`);
  }
}

export function tagsFrom(list: readonly { Key?: string; Value?: string }[] | undefined): Tags {
  const tags: Tags = new Map();
  for (const tag of list ?? []) if (tag.Key !== undefined) tags.set(tag.Key, tag.Value ?? '');
  return tags;
}
