import type { InstanceLimits } from '../../shared/domain/limits.js';
import { Ec2ApiError } from './errors.js';
import { clientIpv6, clientIpv6Prefix, type Ipv6SubnetPool } from './ipv6-pool.js';
import type { EniRecord, SubnetRecord } from './model.js';
import type { Ec2World } from './world.js';

/**
 * IPv6 on ENIs: the per-type rules and AssignIpv6Addresses/UnassignIpv6Addresses. An ENI may hold as many
 * IPv6 addresses as the type's IPv4 addresses per interface (what DescribeInstanceTypes reports as
 * Ipv6AddressesPerInterface); a delegated /80 takes one of those slots, as a /28 does for IPv4. Prefixes need
 * a Nitro type. Every request is all or nothing.
 */
export interface Ipv6Spec {
  readonly addresses?: readonly string[];
  readonly count?: number;
  readonly prefixes?: readonly string[];
  readonly prefixCount?: number;
}

export function ipv6Slots(eni: { ipv6Addresses: readonly string[]; ipv6Prefixes: readonly string[] }): number {
  return eni.ipv6Addresses.length + eni.ipv6Prefixes.length;
}

function count(value: number | undefined, name: string): number {
  if (value === undefined) return 0;
  if (!Number.isInteger(value) || value < 0) {
    throw new Ec2ApiError('InvalidParameterValue', `Invalid value '${value}' for ${name}.`);
  }
  return value;
}

/** How many slots a spec asks for, after checking its counts. */
export function ipv6Wanted(spec: Ipv6Spec): { addresses: number; prefixes: number } {
  return {
    addresses: (spec.addresses?.length ?? 0) + count(spec.count, 'Ipv6AddressCount'),
    prefixes: (spec.prefixes?.length ?? 0) + count(spec.prefixCount, 'Ipv6PrefixCount'),
  };
}

export function ipv6LimitExceeded(eniId: string, limit: number): Ec2ApiError {
  return new Ec2ApiError(
    'InvalidParameterValue',
    `Number of IPv6 addresses and prefixes will exceed limit (${limit}) for network interface ${eniId}.`,
  );
}

/** Prefix delegation needs the Nitro system; bare-metal types (no hypervisor) are Nitro too. */
export function supportsPrefixes(limits: InstanceLimits): boolean {
  return limits.hypervisor === undefined || limits.hypervisor === 'nitro';
}

export function noPrefixesOn(limits: InstanceLimits, parameter: string): Ec2ApiError {
  return new Ec2ApiError(
    'InvalidParameterValue',
    `Prefix delegation (${parameter}) is not supported for instance type ${limits.instanceType}; it needs a Nitro instance.`,
  );
}

/** A launch or CreateNetworkInterface entry may ask for addresses or for prefixes, not both (as EC2 refuses). */
export function checkIpv6Kinds(spec: Ipv6Spec): void {
  const wanted = ipv6Wanted(spec);
  if (
    ((spec.addresses?.length ?? 0) > 0 && (spec.count ?? 0) > 0) ||
    ((spec.prefixes?.length ?? 0) > 0 && (spec.prefixCount ?? 0) > 0) ||
    (wanted.addresses > 0 && wanted.prefixes > 0)
  ) {
    throw new Ec2ApiError(
      'InvalidParameterValue',
      'You can only specify one of Ipv6Addresses, Ipv6AddressCount, Ipv6Prefixes or Ipv6PrefixCount.',
    );
  }
}

function poolOf(subnet: SubnetRecord): Ipv6SubnetPool {
  if (!subnet.ipv6) {
    throw new Ec2ApiError('InvalidParameterValue', `The subnet '${subnet.subnetId}' has no IPv6 CIDR block.`);
  }
  return subnet.ipv6;
}

/** Takes what the spec asks for from the subnet's /64, or nothing. */
export function claimIpv6(subnet: SubnetRecord, spec: Ipv6Spec): { ipv6Addresses: string[]; ipv6Prefixes: string[] } {
  const wanted = ipv6Wanted(spec);
  if (wanted.addresses + wanted.prefixes === 0) return { ipv6Addresses: [], ipv6Prefixes: [] };
  const pool = poolOf(subnet);
  const ipv6Addresses: string[] = [];
  const ipv6Prefixes: string[] = [];
  try {
    for (const a of spec.addresses ?? []) ipv6Addresses.push(pool.claim(a));
    ipv6Addresses.push(...pool.claimAny(spec.count ?? 0));
    for (const p of spec.prefixes ?? []) ipv6Prefixes.push(pool.claimPrefix(p));
    ipv6Prefixes.push(...pool.claimPrefixes(spec.prefixCount ?? 0));
    return { ipv6Addresses, ipv6Prefixes };
  } catch (err) {
    for (const a of ipv6Addresses) pool.release(a);
    for (const p of ipv6Prefixes) pool.releasePrefix(p);
    throw err;
  }
}

export function releaseIpv6(subnet: SubnetRecord, eni: EniRecord): void {
  for (const a of eni.ipv6Addresses) subnet.ipv6?.release(a);
  for (const p of eni.ipv6Prefixes) subnet.ipv6?.releasePrefix(p);
}

function attachedLimits(world: Ec2World, eni: EniRecord): InstanceLimits | undefined {
  const instance = eni.attachment ? world.instances.get(eni.attachment.instanceId) : undefined;
  return instance ? world.limitsOf(instance.instanceType) : undefined;
}

/** Attach: an ENI holding more IPv6 than the type allows, or /80s on a non-Nitro type, is refused. */
export function checkIpv6OnAttach(eni: EniRecord, limits: InstanceLimits): void {
  if (ipv6Slots(eni) > limits.ipv4PerEni) throw ipv6LimitExceeded(eni.eniId, limits.ipv4PerEni);
  if (eni.ipv6Prefixes.length > 0 && !supportsPrefixes(limits)) throw noPrefixesOn(limits, 'Ipv6Prefixes');
}

export function assignIpv6(
  world: Ec2World,
  eniId: string,
  spec: Ipv6Spec,
): { addresses: string[]; prefixes: string[] } {
  const eni = world.eni(eniId);
  const kinds =
    Number((spec.addresses?.length ?? 0) > 0) +
    Number((spec.count ?? 0) > 0) +
    Number((spec.prefixes?.length ?? 0) > 0) +
    Number((spec.prefixCount ?? 0) > 0);
  if (kinds !== 1) {
    throw new Ec2ApiError(
      'InvalidParameterCombination',
      'Specify exactly one of Ipv6Addresses, Ipv6AddressCount, Ipv6Prefixes or Ipv6PrefixCount.',
    );
  }
  const wanted = ipv6Wanted(spec);
  const limits = attachedLimits(world, eni);
  const limit = limits?.ipv4PerEni ?? world.maxIpv4PerEniAnyType();
  if (ipv6Slots(eni) + wanted.addresses + wanted.prefixes > limit) throw ipv6LimitExceeded(eniId, limit);
  if (wanted.prefixes > 0 && limits && !supportsPrefixes(limits)) throw noPrefixesOn(limits, 'Ipv6PrefixCount');
  const fresh = (spec.addresses ?? []).map(clientIpv6).filter((a) => !eni.ipv6Addresses.includes(a));
  const claimed = claimIpv6(world.subnet(eni.subnetId), { ...spec, addresses: fresh });
  eni.ipv6Addresses.push(...claimed.ipv6Addresses);
  eni.ipv6Prefixes.push(...claimed.ipv6Prefixes);
  return { addresses: claimed.ipv6Addresses, prefixes: claimed.ipv6Prefixes };
}

export function unassignIpv6(
  world: Ec2World,
  eniId: string,
  addresses: readonly string[],
  prefixes: readonly string[],
): { addresses: string[]; prefixes: string[] } {
  const eni = world.eni(eniId);
  if (addresses.length === 0 && prefixes.length === 0) {
    throw new Ec2ApiError('MissingParameter', 'Either Ipv6Addresses or Ipv6Prefixes must be specified.');
  }
  const gone = addresses.map(clientIpv6);
  const goneP = prefixes.map(clientIpv6Prefix);
  // Check every item before changing anything: a bad one fails the whole call.
  if (gone.some((a) => !eni.ipv6Addresses.includes(a)) || goneP.some((p) => !eni.ipv6Prefixes.includes(p))) {
    throw new Ec2ApiError(
      'InvalidParameterValue',
      `Some of the specified IPv6 addresses or prefixes are not assigned to interface ${eniId}`,
    );
  }
  const pool = world.subnet(eni.subnetId).ipv6;
  for (const a of gone) pool?.release(a);
  for (const p of goneP) pool?.releasePrefix(p);
  eni.ipv6Addresses = eni.ipv6Addresses.filter((a) => !gone.includes(a));
  eni.ipv6Prefixes = eni.ipv6Prefixes.filter((p) => !goneP.includes(p));
  return { addresses: gone, prefixes: goneP };
}
