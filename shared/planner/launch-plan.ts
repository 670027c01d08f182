import { ADDRESSES_PER_PREFIX, type InstanceLimits } from '../domain/limits.js';
import { PlanError } from './errors.js';
import { addressesPerPodEni, type IpFamilySetting, ipv6PrefixesPossible, maxPodsFor } from './max-pods.js';
import { rankSubnets, type SubnetCandidate } from './subnets.js';

/** An interface the instance already has (the boot ENI at least), so its slot is not planned again. */
export interface ExistingInterface {
  readonly deviceIndex: number;
  readonly networkCardIndex: number;
}

export interface LaunchPlanInput {
  readonly limits: InstanceLimits;
  readonly availabilityZone: string;
  readonly prefixDelegation: boolean;
  /** Leases the node must have before its launch completes. */
  readonly minLeases: number;
  /** The upper watermark: a launch fills up to it, since addresses ride free on the create call. */
  readonly warmHighLeases: number;
  /** The configured cap on leases per node (kubelet's max-pods). */
  readonly maxPods: number;
  /** ControlPlaneConfig.ipFamily: the recorded max-pods figure depends on it (max-pods.ts). Default ipv4. */
  readonly ipFamily?: IpFamilySetting;
  /** Candidate subnets (boot subnet, or pod subnets by ids or tags); other AZs are ignored here. */
  readonly subnets: readonly SubnetCandidate[];
  readonly existing: readonly ExistingInterface[];
}

export interface PlannedEni {
  readonly deviceIndex: number;
  readonly networkCardIndex: number;
  readonly subnetId: string;
  /** Secondary addresses to request (0 in prefix mode). */
  readonly ipCount: number;
  /** /28 prefixes to request (0 in secondary-address mode). */
  readonly prefixCount: number;
  /** IPv6 /80s to request: one in `ipv6` and `dual`, else 0. */
  readonly ipv6PrefixCount: number;
}

export interface LaunchPlan {
  readonly enis: readonly PlannedEni[];
  /** Leases the plan yields, at most maxPods (prefix mode: part of the last /28 may then stay unleased). */
  readonly leaseCount: number;
  /** kubelet's max-pods for this node (see maxPodsFor). */
  readonly maxPods: number;
}

/** Free (device index, network card) slots: indexes from 1, default card first, then the others in order. */
export function freeEniSlots(limits: InstanceLimits, existing: readonly ExistingInterface[]): ExistingInterface[] {
  const cards = [...(limits.networkCards.length > 0 ? limits.networkCards : [])].sort((a, b) => {
    const aDefault = a.networkCardIndex === limits.defaultNetworkCardIndex ? 0 : 1;
    const bDefault = b.networkCardIndex === limits.defaultNetworkCardIndex ? 0 : 1;
    return aDefault - bDefault || a.networkCardIndex - b.networkCardIndex;
  });
  if (cards.length === 0) cards.push({ networkCardIndex: limits.defaultNetworkCardIndex, maxEnis: limits.maxEnis });
  const usedIndexes = new Set(existing.map((e) => e.deviceIndex));
  usedIndexes.add(0); // the boot ENI's index even when the caller did not list it
  const slots: ExistingInterface[] = [];
  let total = Math.max(existing.length, 1);
  let nextIndex = 1;
  for (const card of cards) {
    let onCard = existing.filter((e) => e.networkCardIndex === card.networkCardIndex).length;
    if (card.networkCardIndex === limits.defaultNetworkCardIndex && !existing.some((e) => e.deviceIndex === 0))
      onCard += 1;
    while (onCard < card.maxEnis && total < limits.maxEnis) {
      while (usedIndexes.has(nextIndex)) nextIndex += 1;
      slots.push({ deviceIndex: nextIndex, networkCardIndex: card.networkCardIndex });
      usedIndexes.add(nextIndex);
      onCard += 1;
      total += 1;
    }
  }
  return slots;
}

/**
 * Plans the pod ENIs of a launching node: a pure function of the limits, the targets and the subnets.
 *
 * - Target = min(max(minLeases, warmHighLeases), lease cap): a launch asks for its addresses in the same
 *   CreateNetworkInterface call, so filling up to the upper watermark costs no extra EC2 call, and never
 *   above it, or the pool-manager would release the excess right away.
 * - As few ENIs as possible: each is filled to its limit before the next is planned.
 * - Each ENI goes to the subnet with the most free addresses left (several ENIs may share a subnet); an ENI
 *   that does not fit asks for what the subnet still has.
 * @throws PlanError when fewer than minLeases can be planned (limits reached, subnets exhausted) or the
 *   configuration cannot work for this instance (prefix delegation off Nitro).
 */
export function planLaunch(input: LaunchPlanInput): LaunchPlan {
  const { limits } = input;
  const family = input.ipFamily ?? 'ipv4';
  // IPv6-only pods take no IPv4 address, so /28s would only be wasted.
  const prefixDelegation = input.prefixDelegation && family !== 'ipv6';
  if (prefixDelegation && limits.hypervisor !== undefined && limits.hypervisor !== 'nitro')
    throw new PlanError('config', `prefix delegation needs a Nitro instance; ${limits.instanceType} is not one`);
  // Refused rather than served from single IPv6 addresses: those are capped per ENI like IPv4, which is what
  // ipv6 clusters exist to escape, and max-pods would then differ by instance generation.
  if (family !== 'ipv4' && !ipv6PrefixesPossible(limits))
    throw new PlanError(
      'config',
      `ipFamily ${family} gives each pod ENI an IPv6 /80, which EC2 delegates only on Nitro; ${limits.instanceType} is not one`,
    );
  const ipv6PrefixCount = family === 'ipv4' ? 0 : 1;
  const maxPods = maxPodsFor(limits, { prefixDelegation, capPods: input.maxPods, ipFamily: family });
  // The node's own figure, not just the configured cap: leases beyond what kubelet admits would never be claimed.
  const leaseCap = maxPods;
  const target = Math.min(Math.max(input.minLeases, input.warmHighLeases), leaseCap);
  const perEni = addressesPerPodEni(limits, prefixDelegation, family);
  const slots = freeEniSlots(limits, input.existing);
  const capacity = slots.length * perEni;
  if (capacity < input.minLeases)
    throw new PlanError(
      'limits',
      `${limits.instanceType} can lease ${capacity} addresses on ${slots.length} pod ENIs, below minLeases ${input.minLeases}`,
    );

  // An IPv6 pod's /80 comes from its ENI's subnet: only subnets with an IPv6 CIDR can serve.
  const usable = family === 'ipv4' ? input.subnets : input.subnets.filter((s) => s.ipv6Cidr !== undefined);
  const free = new Map(rankSubnets(usable, input.availabilityZone).map((s) => [s.subnetId, s]));
  const freeCount = new Map([...free.values()].map((s) => [s.subnetId, s.availableIpCount]));
  const enis: PlannedEni[] = [];
  let planned = 0;
  for (const slot of slots) {
    if (planned >= target) break;
    const best = [...freeCount.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))[0];
    if (!best) break;
    const [subnetId, available] = best;
    const want = Math.min(perEni, target - planned);
    // The ENI's own primary address comes out of the subnet too.
    const room = available - 1;
    if (family === 'ipv6') {
      if (room < 0) break;
      enis.push({ ...slot, subnetId, ipCount: 0, prefixCount: 0, ipv6PrefixCount });
      freeCount.set(subnetId, available - 1);
      planned += want;
    } else if (prefixDelegation) {
      const prefixes = Math.min(Math.ceil(want / ADDRESSES_PER_PREFIX), Math.floor(room / ADDRESSES_PER_PREFIX));
      if (prefixes <= 0) break;
      enis.push({ ...slot, subnetId, ipCount: 0, prefixCount: prefixes, ipv6PrefixCount });
      freeCount.set(subnetId, available - 1 - prefixes * ADDRESSES_PER_PREFIX);
      planned += prefixes * ADDRESSES_PER_PREFIX;
    } else {
      const ips = Math.min(want, room);
      if (ips <= 0) break;
      enis.push({ ...slot, subnetId, ipCount: ips, prefixCount: 0, ipv6PrefixCount });
      freeCount.set(subnetId, available - 1 - ips);
      planned += ips;
    }
  }
  const leaseCount = Math.min(planned, leaseCap);
  if (leaseCount < input.minLeases) {
    const names = [...free.keys()].join(', ') || 'none';
    throw new PlanError(
      free.size === 0 ? 'config' : 'subnets-exhausted',
      free.size === 0
        ? `no candidate subnet${family === 'ipv4' ? '' : ' with an IPv6 CIDR'} in ${input.availabilityZone}`
        : `candidate subnets (${names}) in ${input.availabilityZone} have room for ${leaseCount} of minLeases ${input.minLeases}`,
    );
  }
  return { enis, leaseCount, maxPods };
}
