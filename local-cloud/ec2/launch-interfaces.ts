import { ADDRESSES_PER_PREFIX, type InstanceLimits } from '../../shared/domain/limits.js';
import type { LaunchInterfaceSpec, LaunchRequest } from '../ports.js';
import { createEni, removeEni } from './enis.js';
import { Ec2ApiError } from './errors.js';
import {
  checkIpv6Kinds,
  type Ipv6Spec,
  ipv6LimitExceeded,
  ipv6Wanted,
  noPrefixesOn,
  supportsPrefixes,
} from './ipv6-enis.js';
import type { EniRecord, SubnetRecord } from './model.js';
import type { Ec2World } from './world.js';

/** A launch's ENIs, boot ENI (device index 0, network card 0) first, each with its resolved subnet. */
export interface ResolvedInterface extends LaunchInterfaceSpec {
  readonly subnet: SubnetRecord;
  readonly networkCardIndex: number;
  readonly groupIds: readonly string[];
  readonly deleteOnTermination: boolean;
}

export interface LaunchInterfaces {
  readonly interfaces: readonly ResolvedInterface[];
  /** Whether the instance gets an auto-assigned public IPv4 (never with more than one ENI). */
  readonly publicIp: boolean;
}

/**
 * RunInstances' rules for the ENIs it creates, checked before anything is allocated (as EC2 refuses the whole
 * request): one ENI per (network card, device index), the type's ENI count per card and in all, its IPv4
 * slots per ENI (primary + secondaries + one per /28), prefixes only on Nitro, every subnet in the boot
 * subnet's AZ and VPC, and AssociatePublicIpAddress only with a single ENI.
 */
export function resolveLaunchInterfaces(
  world: Ec2World,
  limits: InstanceLimits,
  request: LaunchRequest,
): LaunchInterfaces {
  const boot = world.subnet(request.subnetId);
  const specs = request.networkInterfaces ?? [];
  const bootSpec = specs.find((s) => s.deviceIndex === 0 && (s.networkCardIndex ?? 0) === 0);
  if (bootSpec?.subnetId !== undefined && bootSpec.subnetId !== boot.subnetId)
    throw new Ec2ApiError(
      'InvalidParameterCombination',
      'The subnet of the network interface at device index 0 and the instance subnet differ.',
    );
  const all: LaunchInterfaceSpec[] = [
    {
      groupIds: request.securityGroupIds ?? [],
      ...bootSpec,
      deviceIndex: 0,
      deleteOnTermination: bootSpec?.deleteOnTermination ?? true,
    },
    ...specs.filter((s) => s !== bootSpec),
  ];
  const seen = new Set<string>();
  const interfaces = all.map((spec): ResolvedInterface => {
    const networkCardIndex = spec.networkCardIndex ?? 0;
    if (!Number.isInteger(spec.deviceIndex) || spec.deviceIndex < 0)
      throw new Ec2ApiError('InvalidParameterValue', `Invalid value '${spec.deviceIndex}' for DeviceIndex.`);
    const slot = `${networkCardIndex}/${spec.deviceIndex}`;
    if (seen.has(slot))
      throw new Ec2ApiError(
        'InvalidParameterValue',
        `Each network interface requires a unique device index; ${spec.deviceIndex} is used twice on network card ${networkCardIndex}.`,
      );
    seen.add(slot);
    const subnet = spec.subnetId === undefined ? boot : world.subnet(spec.subnetId);
    if (subnet.availabilityZone !== boot.availabilityZone || subnet.vpcId !== boot.vpcId)
      throw new Ec2ApiError(
        'InvalidParameterCombination',
        `The network interface at device index ${spec.deviceIndex} is in subnet ${subnet.subnetId} (${subnet.availabilityZone}); all of an instance's network interfaces must be in ${boot.availabilityZone} of ${boot.vpcId}.`,
      );
    const groupIds = spec.groupIds ?? request.securityGroupIds ?? [];
    world.checkGroups(groupIds, subnet.vpcId);
    return { ...spec, subnet, networkCardIndex, groupIds, deleteOnTermination: spec.deleteOnTermination ?? true };
  });
  checkCounts(limits, interfaces);
  for (const i of interfaces) checkAddresses(limits, i);
  const explicitPublic = interfaces.some((i) => i.associatePublicIpAddress === true);
  if (explicitPublic && interfaces.length > 1)
    throw new Ec2ApiError(
      'InvalidParameterCombination',
      'The associatePublicIPAddress parameter cannot be specified when launching with multiple network interfaces.',
    );
  // The subnet's MapPublicIpOnLaunch applies only to a single-ENI launch: with more, EC2 silently assigns none.
  const wanted = bootSpec?.associatePublicIpAddress ?? boot.mapPublicIpOnLaunch;
  return { interfaces, publicIp: wanted && interfaces.length === 1 };
}

function checkCounts(limits: InstanceLimits, interfaces: readonly ResolvedInterface[]): void {
  const exceeded = (): Ec2ApiError =>
    new Ec2ApiError(
      'AttachmentLimitExceeded',
      `Interface count ${interfaces.length} exceeds the limit for ${limits.instanceType}`,
    );
  if (interfaces.length > limits.maxEnis) throw exceeded();
  for (const i of interfaces) {
    const card = limits.networkCards.find((c) => c.networkCardIndex === i.networkCardIndex);
    if (!card && !(limits.networkCards.length === 0 && i.networkCardIndex === 0))
      throw new Ec2ApiError('InvalidParameterValue', `Invalid value '${i.networkCardIndex}' for NetworkCardIndex.`);
    const onCard = interfaces.filter((o) => o.networkCardIndex === i.networkCardIndex).length;
    if (card && onCard > card.maxEnis) throw exceeded();
  }
}

function checkAddresses(limits: InstanceLimits, i: ResolvedInterface): void {
  const secondary = i.secondaryPrivateIpAddressCount ?? 0;
  const prefixes = i.ipv4PrefixCount ?? 0;
  if (prefixes > 0 && !supportsPrefixes(limits)) throw noPrefixesOn(limits, 'Ipv4PrefixCount');
  const slots = 1 + secondary + prefixes;
  if (slots > limits.ipv4PerEni)
    throw new Ec2ApiError(
      'PrivateIpAddressLimitExceeded',
      `Number of private addresses (${slots}) of the network interface at device index ${i.deviceIndex} exceeds the limit (${limits.ipv4PerEni}) for ${limits.instanceType}.`,
    );
  const ipv6 = ipv6SpecOf(i);
  checkIpv6Kinds(ipv6);
  const wanted = ipv6Wanted(ipv6);
  if (wanted.addresses + wanted.prefixes > limits.ipv4PerEni)
    throw ipv6LimitExceeded(`at device index ${i.deviceIndex}`, limits.ipv4PerEni);
  if (wanted.prefixes > 0 && !supportsPrefixes(limits)) throw noPrefixesOn(limits, 'Ipv6PrefixCount');
  if (wanted.addresses + wanted.prefixes > 0 && !i.subnet.ipv6)
    throw new Ec2ApiError('InvalidParameterValue', `The subnet '${i.subnet.subnetId}' has no IPv6 CIDR block.`);
}

function ipv6SpecOf(i: LaunchInterfaceSpec): Ipv6Spec {
  return {
    ...(i.ipv6Addresses ? { addresses: i.ipv6Addresses } : {}),
    ...(i.ipv6AddressCount !== undefined ? { count: i.ipv6AddressCount } : {}),
    ...(i.ipv6Prefixes ? { prefixes: i.ipv6Prefixes } : {}),
    ...(i.ipv6PrefixCount !== undefined ? { prefixCount: i.ipv6PrefixCount } : {}),
  };
}

/**
 * Creates every ENI of a launch, or none: a subnet that runs dry part-way (InsufficientFreeAddressesInSubnet)
 * gives back what the earlier ENIs took, so a refused launch leaves each subnet's count as it was.
 */
export function createLaunchEnis(
  world: Ec2World,
  launch: LaunchInterfaces,
  tags: Readonly<Record<string, string>>,
): EniRecord[] {
  const created: EniRecord[] = [];
  try {
    for (const i of launch.interfaces) {
      created.push(
        createEni(world, {
          subnetId: i.subnet.subnetId,
          description: i.description ?? (i.deviceIndex === 0 ? 'Primary network interface' : ''),
          groupIds: i.groupIds,
          ...(i.secondaryPrivateIpAddressCount ? { secondaryCount: i.secondaryPrivateIpAddressCount } : {}),
          ...(i.ipv4PrefixCount ? { prefixCount: i.ipv4PrefixCount } : {}),
          ipv6: ipv6SpecOf(i),
          tags: new Map(Object.entries(tags)),
        }),
      );
    }
    return created;
  } catch (err) {
    for (const eni of created) removeEni(world, eni);
    throw err;
  }
}

/** Addresses one launch takes from each subnet (primary + secondaries + 16 per /28), to size a RunInstances. */
export function addressesPerLaunch(launch: LaunchInterfaces): Map<string, number> {
  const need = new Map<string, number>();
  for (const i of launch.interfaces) {
    const n = 1 + (i.secondaryPrivateIpAddressCount ?? 0) + (i.ipv4PrefixCount ?? 0) * ADDRESSES_PER_PREFIX;
    need.set(i.subnet.subnetId, (need.get(i.subnet.subnetId) ?? 0) + n);
  }
  return need;
}
