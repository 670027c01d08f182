import { Ec2ApiError, notFound } from './errors.js';
import {
  checkIpv6Kinds,
  checkIpv6OnAttach,
  claimIpv6,
  type Ipv6Spec,
  ipv6LimitExceeded,
  ipv6Wanted,
  releaseIpv6,
} from './ipv6-enis.js';
import type { EniRecord, Tags } from './model.js';
import type { SubnetPool } from './subnet-pool.js';
import type { Ec2World } from './world.js';

export interface CreateEniSpec {
  readonly subnetId: string;
  readonly description?: string;
  readonly groupIds?: readonly string[];
  /** Explicit addresses; the one marked primary (else the first) becomes the primary address. */
  readonly privateIps?: readonly { readonly address: string; readonly primary: boolean }[];
  readonly secondaryCount?: number;
  readonly prefixes?: readonly string[];
  readonly prefixCount?: number;
  readonly ipv6?: Ipv6Spec;
  readonly tags?: Tags;
}

/**
 * Claims everything or nothing: a request that runs the subnet dry part-way gives back what it took, so a
 * failed CreateNetworkInterface/AssignPrivateIpAddresses leaves the subnet's count exactly as it was.
 */
class Claims {
  private readonly undo: (() => void)[] = [];
  constructor(private readonly pool: SubnetPool) {}
  address(ip: string): string {
    this.pool.claim(ip);
    this.undo.push(() => this.pool.release(ip));
    return ip;
  }
  anyAddresses(count: number): string[] {
    const ips = this.pool.claimAny(count);
    this.undo.push(() => {
      for (const ip of ips) this.pool.release(ip);
    });
    return ips;
  }
  prefix(prefix: string): string {
    this.pool.claimPrefix(prefix);
    this.undo.push(() => this.pool.releasePrefix(prefix));
    return prefix;
  }
  anyPrefixes(count: number): string[] {
    const prefixes = this.pool.claimPrefixes(count);
    this.undo.push(() => {
      for (const p of prefixes) this.pool.releasePrefix(p);
    });
    return prefixes;
  }
  rollback(): void {
    for (const step of this.undo.reverse()) step();
  }
}

function ipLimitOf(world: Ec2World, eni: EniRecord): number {
  const attachment = eni.attachment;
  if (!attachment) return world.maxIpv4PerEniAnyType();
  const instance = world.instances.get(attachment.instanceId);
  return instance ? world.limitsOf(instance.instanceType).ipv4PerEni : world.maxIpv4PerEniAnyType();
}

/** Every secondary address and every /28 prefix takes one of the type's IPv4-per-ENI slots, as on Nitro. */
export function slotsUsed(eni: { privateIps: readonly string[]; prefixes: readonly string[] }): number {
  return eni.privateIps.length + eni.prefixes.length;
}

function ipLimitExceeded(eniId: string, limit: number): Ec2ApiError {
  return new Ec2ApiError(
    'PrivateIpAddressLimitExceeded',
    `Number of private addresses will exceed limit (${limit}) for network interface ${eniId}.`,
  );
}

function checkCount(value: number | undefined, name: string): number {
  if (value === undefined) return 0;
  if (!Number.isInteger(value) || value < 0) {
    throw new Ec2ApiError('InvalidParameterValue', `Invalid value '${value}' for ${name}.`);
  }
  return value;
}

export function createEni(world: Ec2World, spec: CreateEniSpec): EniRecord {
  const subnet = world.subnet(spec.subnetId);
  const groupIds = [...(spec.groupIds ?? [])];
  world.checkGroups(groupIds, subnet.vpcId);
  const secondaryCount = checkCount(spec.secondaryCount, 'SecondaryPrivateIpAddressCount');
  const prefixCount = checkCount(spec.prefixCount, 'Ipv4PrefixCount');
  const explicit = spec.privateIps ?? [];
  if (explicit.filter((p) => p.primary).length > 1) {
    throw new Ec2ApiError('InvalidParameterValue', 'Only one primary private IP address can be specified.');
  }
  const prefixesWanted = (spec.prefixes?.length ?? 0) + prefixCount;
  const wantedSlots = Math.max(1, explicit.length) + secondaryCount + prefixesWanted;
  const limit = world.maxIpv4PerEniAnyType();
  const eniId = world.random.id('eni');
  if (wantedSlots > limit) throw ipLimitExceeded(eniId, limit);
  const ipv6 = spec.ipv6 ?? {};
  checkIpv6Kinds(ipv6);
  const ipv6Asked = ipv6Wanted(ipv6);
  if (ipv6Asked.addresses + ipv6Asked.prefixes > limit) throw ipv6LimitExceeded(eniId, limit);

  const claims = new Claims(subnet.pool);
  try {
    const ordered = [...explicit].sort((a, b) => Number(b.primary) - Number(a.primary));
    const privateIps = ordered.map((p) => claims.address(p.address));
    if (privateIps.length === 0) privateIps.push(...claims.anyAddresses(1));
    privateIps.push(...claims.anyAddresses(secondaryCount));
    const prefixes = (spec.prefixes ?? []).map((p) => claims.prefix(p));
    prefixes.push(...claims.anyPrefixes(prefixCount));
    const { ipv6Addresses, ipv6Prefixes } = claimIpv6(subnet, ipv6);
    const now = world.timeline.nowMs();
    const eni: EniRecord = {
      eniId,
      subnetId: subnet.subnetId,
      vpcId: subnet.vpcId,
      availabilityZone: subnet.availabilityZone,
      mac: world.random.mac(),
      description: spec.description ?? '',
      privateIps,
      prefixes,
      ipv6Addresses,
      ipv6Prefixes,
      groupIds,
      sourceDestCheck: true,
      tags: new Map(spec.tags ?? []),
      attachment: undefined,
      visibleAtMs: world.visibleAt(),
      createdAtMs: now,
    };
    world.enis.set(eniId, eni);
    return eni;
  } catch (err) {
    claims.rollback();
    throw err;
  }
}

export interface AttachSpec {
  readonly eniId: string;
  readonly instanceId: string;
  readonly deviceIndex: number;
  readonly networkCardIndex?: number;
  /** ENIs created by RunInstances are attached at launch: attached at once, DeleteOnTermination set. */
  readonly atLaunch?: boolean;
  /** At launch: the NetworkInterfaces entry's DeleteOnTermination (default true). */
  readonly deleteOnTermination?: boolean;
}

export function attachEni(world: Ec2World, spec: AttachSpec): string {
  const eni = world.eni(spec.eniId);
  const instance = world.instance(spec.instanceId);
  if (!['pending', 'running', 'stopped'].includes(instance.state)) {
    throw new Ec2ApiError(
      'IncorrectInstanceState',
      `The instance '${instance.instanceId}' is not in a valid state for this operation.`,
    );
  }
  if (eni.attachment) {
    throw new Ec2ApiError('InvalidNetworkInterface.InUse', `Interface: [${eni.eniId}] in use.`);
  }
  if (eni.availabilityZone !== instance.availabilityZone || eni.vpcId !== instance.vpcId) {
    throw new Ec2ApiError(
      'InvalidParameterCombination',
      `You may not attach a network interface to an instance if they are not in the same availability zone`,
    );
  }
  const limits = world.limitsOf(instance.instanceType);
  const cardIndex = spec.networkCardIndex ?? 0;
  const card = limits.networkCards.find((c) => c.networkCardIndex === cardIndex);
  if (!card) {
    throw new Ec2ApiError('InvalidParameterValue', `Invalid value '${cardIndex}' for NetworkCardIndex.`);
  }
  if (!Number.isInteger(spec.deviceIndex) || spec.deviceIndex < 0) {
    throw new Ec2ApiError('InvalidParameterValue', `Invalid value '${spec.deviceIndex}' for DeviceIndex.`);
  }
  const attached = [...world.enis.values()].filter((e) => e.attachment?.instanceId === instance.instanceId);
  const conflict = attached.find(
    (e) => e.attachment?.deviceIndex === spec.deviceIndex && e.attachment.networkCardIndex === cardIndex,
  );
  if (conflict) {
    throw new Ec2ApiError(
      'InvalidParameterValue',
      `Instance '${instance.instanceId}' already has an interface attached at device index '${spec.deviceIndex}'.`,
    );
  }
  const onCard = attached.filter((e) => e.attachment?.networkCardIndex === cardIndex).length;
  if (attached.length >= limits.maxEnis || onCard >= card.maxEnis) {
    throw new Ec2ApiError(
      'AttachmentLimitExceeded',
      `Interface count ${attached.length + 1} exceeds the limit for ${instance.instanceType}`,
    );
  }
  if (slotsUsed(eni) > limits.ipv4PerEni) throw ipLimitExceeded(eni.eniId, limits.ipv4PerEni);
  checkIpv6OnAttach(eni, limits);

  const attachment = {
    attachmentId: world.random.id('eni-attach'),
    instanceId: instance.instanceId,
    deviceIndex: spec.deviceIndex,
    networkCardIndex: cardIndex,
    attachTimeMs: world.timeline.nowMs(),
    status: spec.atLaunch ? ('attached' as const) : ('attaching' as const),
    deleteOnTermination: spec.atLaunch === true && spec.deleteOnTermination !== false,
  };
  eni.attachment = attachment;
  if (!spec.atLaunch) {
    world.timeline.after(world.config.delays.attachMs, () =>
      world.progressAttachment(() => {
        if (eni.attachment === attachment && attachment.status === 'attaching') attachment.status = 'attached';
      }),
    );
  }
  return attachment.attachmentId;
}

export function findAttachment(world: Ec2World, attachmentId: string): EniRecord {
  for (const eni of world.enis.values()) if (eni.attachment?.attachmentId === attachmentId) return eni;
  throw notFound('Attachment', attachmentId);
}

export function detachEni(world: Ec2World, attachmentId: string): void {
  const eni = findAttachment(world, attachmentId);
  const attachment = eni.attachment;
  if (!attachment || attachment.status === 'detaching') return;
  if (attachment.deviceIndex === 0 && attachment.networkCardIndex === 0) {
    throw new Ec2ApiError('OperationNotPermitted', 'The network interface at device index 0 cannot be detached.');
  }
  attachment.status = 'detaching';
  world.timeline.after(world.config.delays.detachMs, () =>
    world.progressAttachment(() => {
      if (eni.attachment === attachment) eni.attachment = undefined;
    }),
  );
}

export function deleteEni(world: Ec2World, eniId: string): void {
  const eni = world.eni(eniId);
  if (eni.attachment) {
    throw new Ec2ApiError('InvalidNetworkInterface.InUse', `The network interface '${eniId}' is currently in use.`);
  }
  removeEni(world, eni);
}

/** Frees the ENI's addresses and prefixes and forgets it (no rule checks: termination uses it too). */
export function removeEni(world: Ec2World, eni: EniRecord): void {
  const pool = world.subnet(eni.subnetId).pool;
  for (const ip of eni.privateIps) pool.release(ip);
  for (const prefix of eni.prefixes) pool.releasePrefix(prefix);
  releaseIpv6(world.subnet(eni.subnetId), eni);
  world.enis.delete(eni.eniId);
}

export interface AssignSpec {
  readonly addresses?: readonly string[];
  readonly count?: number;
  readonly prefixes?: readonly string[];
  readonly prefixCount?: number;
  readonly allowReassignment?: boolean;
}

export function assignAddresses(
  world: Ec2World,
  eniId: string,
  spec: AssignSpec,
): { addresses: string[]; prefixes: string[] } {
  const eni = world.eni(eniId);
  const subnet = world.subnet(eni.subnetId);
  const count = checkCount(spec.count, 'SecondaryPrivateIpAddressCount');
  const prefixCount = checkCount(spec.prefixCount, 'Ipv4PrefixCount');
  const explicit = spec.addresses ?? [];
  const explicitPrefixes = spec.prefixes ?? [];
  if (
    (explicit.length > 0 ? 1 : 0) +
      (count > 0 ? 1 : 0) +
      (explicitPrefixes.length > 0 ? 1 : 0) +
      (prefixCount > 0 ? 1 : 0) !==
    1
  ) {
    throw new Ec2ApiError(
      'InvalidParameterCombination',
      'Specify exactly one of PrivateIpAddresses, SecondaryPrivateIpAddressCount, Ipv4Prefixes or Ipv4PrefixCount.',
    );
  }
  const limit = ipLimitOf(world, eni);
  const wanted = explicit.length + count + explicitPrefixes.length + prefixCount;
  if (slotsUsed(eni) + wanted > limit) throw ipLimitExceeded(eniId, limit);

  const claims = new Claims(subnet.pool);
  const moved: { from: EniRecord; ip: string }[] = [];
  try {
    const addresses: string[] = [];
    for (const ip of explicit) {
      if (eni.privateIps.includes(ip)) continue;
      const owner = spec.allowReassignment ? ownerOf(world, eni.subnetId, ip) : undefined;
      if (owner && owner.privateIps[0] !== ip) {
        owner.privateIps = owner.privateIps.filter((a) => a !== ip);
        moved.push({ from: owner, ip });
        addresses.push(ip);
        continue;
      }
      addresses.push(claims.address(ip));
    }
    addresses.push(...claims.anyAddresses(count));
    const prefixes = explicitPrefixes.map((p) => claims.prefix(p));
    prefixes.push(...claims.anyPrefixes(prefixCount));
    eni.privateIps.push(...addresses);
    eni.prefixes.push(...prefixes);
    return { addresses, prefixes };
  } catch (err) {
    claims.rollback();
    for (const { from, ip } of moved) from.privateIps.push(ip);
    throw err;
  }
}

function ownerOf(world: Ec2World, subnetId: string, ip: string): EniRecord | undefined {
  for (const eni of world.enis.values()) if (eni.subnetId === subnetId && eni.privateIps.includes(ip)) return eni;
  return undefined;
}

export function unassignAddresses(
  world: Ec2World,
  eniId: string,
  addresses: readonly string[],
  prefixes: readonly string[],
): void {
  const eni = world.eni(eniId);
  if (addresses.length === 0 && prefixes.length === 0) {
    throw new Ec2ApiError('MissingParameter', 'Either PrivateIpAddresses or Ipv4Prefixes must be specified.');
  }
  for (const ip of addresses) {
    if (ip === eni.privateIps[0]) {
      throw new Ec2ApiError('InvalidParameterValue', `The primary private IP address ${ip} cannot be unassigned.`);
    }
    if (!eni.privateIps.includes(ip)) {
      throw new Ec2ApiError(
        'InvalidParameterValue',
        `Some of the specified addresses are not assigned to interface ${eniId}`,
      );
    }
  }
  for (const prefix of prefixes) {
    if (!eni.prefixes.includes(prefix)) {
      throw new Ec2ApiError(
        'InvalidParameterValue',
        `Some of the specified prefixes are not assigned to interface ${eniId}`,
      );
    }
  }
  const pool = world.subnet(eni.subnetId).pool;
  for (const ip of addresses) pool.release(ip);
  for (const prefix of prefixes) pool.releasePrefix(prefix);
  eni.privateIps = eni.privateIps.filter((ip) => !addresses.includes(ip));
  eni.prefixes = eni.prefixes.filter((p) => !prefixes.includes(p));
}
