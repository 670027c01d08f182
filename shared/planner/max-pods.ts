import { ADDRESSES_PER_PREFIX, type InstanceLimits } from '../domain/limits.js';
import type { IpFamilySetting } from '../domain/node.js';

export type { IpFamilySetting };

/**
 * Pods that use the host network (kube-proxy, the node's daemons) need no VPC address but count against
 * kubelet's max-pods; EKS's formula adds the same 2.
 */
export const DEFAULT_HOST_NETWORK_PODS = 2;

/** The pool and launch configuration the figure depends on: the same on the node, in the CLI and the Lambdas. */
export interface MaxPodsOptions {
  /** /28 prefixes instead of single secondary addresses (ControlPlaneConfig.prefixDelegation). */
  readonly prefixDelegation: boolean;
  /** The configured cap (ControlPlaneConfig.maxPods). */
  readonly capPods: number;
  readonly hostNetworkPods?: number;
  /** ControlPlaneConfig.ipFamily; default ipv4. */
  readonly ipFamily?: IpFamilySetting;
}

/** A /80 holds 2^48 addresses: no cap anyone sets comes near what one pod ENI's prefix can lease. */
const IPV6_ADDRESSES_PER_POD_ENI = Number.MAX_SAFE_INTEGER;

/** IPv6 pods come from one delegated /80 per pod ENI, and EC2 delegates IPv6 prefixes only on Nitro. */
export function ipv6PrefixesPossible(limits: InstanceLimits): boolean {
  return limits.hypervisor === undefined || limits.hypervisor === 'nitro';
}

/**
 * ENIs pods can use: every interface but the boot ENI (device index 0 on the default card, never used for
 * pods), within both the instance-wide limit and each network card's own limit. The data reports some
 * multi-card types with an instance-wide figure below the sum of their cards, so the smaller one wins.
 */
export function podEniSlots(limits: InstanceLimits): number {
  const cards =
    limits.networkCards.length > 0
      ? limits.networkCards
      : [{ networkCardIndex: limits.defaultNetworkCardIndex, maxEnis: limits.maxEnis }];
  const perCards = cards.reduce(
    (sum, card) => sum + card.maxEnis - (card.networkCardIndex === limits.defaultNetworkCardIndex ? 1 : 0),
    0,
  );
  return Math.max(0, Math.min(limits.maxEnis - 1, perCards));
}

/**
 * Addresses one pod ENI can lease: its secondary addresses, or every address of its /28 prefixes; in `ipv6`,
 * its /80 (unbounded for any cap; none off Nitro). `dual` pods need an IPv4 lease each, so IPv4 decides.
 */
export function addressesPerPodEni(
  limits: InstanceLimits,
  prefixDelegation: boolean,
  ipFamily: IpFamilySetting = 'ipv4',
): number {
  if (ipFamily === 'ipv6') return ipv6PrefixesPossible(limits) ? IPV6_ADDRESSES_PER_POD_ENI : 0;
  // The primary address stays with the ENI; on Nitro each delegated prefix takes one secondary-address slot.
  const slots = Math.max(0, limits.ipv4PerEni - 1);
  return prefixDelegation ? slots * ADDRESSES_PER_PREFIX : slots;
}

/**
 * kubelet's max-pods for ipvlan pods on non-boot ENIs:
 *
 *   maxPods = min(capPods, (maxEnis − 1) × (ipv4PerEni − 1) × k + hostNetworkPods)
 *
 * with k = 1 for secondary addresses and k = 16 with prefix delegation (each /28 takes one address slot),
 * and (maxEnis − 1) taken per network card (see podEniSlots). Unlike EKS's `maxEnis × (ipv4PerEni − 1) + 2`,
 * the boot ENI contributes nothing: vpc-lease never puts pods on it.
 *
 * In `ipv6` every pod ENI's /80 outnumbers any cap, so the cap decides (as EKS's IPv6 clusters, whose figure is
 * its prefix-mode cap of 110 or 250) — given at least one pod ENI on a Nitro type. `dual` is the IPv4 figure.
 */
export function maxPodsFor(limits: InstanceLimits, options: MaxPodsOptions): number {
  const hostNetworkPods = options.hostNetworkPods ?? DEFAULT_HOST_NETWORK_PODS;
  const perEni = addressesPerPodEni(limits, options.prefixDelegation, options.ipFamily);
  const vpcPods = Math.min(Number.MAX_SAFE_INTEGER - hostNetworkPods, podEniSlots(limits) * perEni);
  return Math.max(1, Math.min(options.capPods, vpcPods + hostNetworkPods));
}

/**
 * The most leases a node may hold: the max-pods figure its node item records (what kubelet was given at boot),
 * or the configured cap when that is lower (lowered since). A raised cap never lifts a running node past the
 * figure its kubelet admits pods by. A record without a figure (0: written before planning) takes the cap.
 */
export function leaseCapFor(recordedMaxPods: number, capPods: number): number {
  return recordedMaxPods > 0 ? Math.min(recordedMaxPods, capPods) : capPods;
}

/** The figure with the terms it came from, as both CLIs print it. */
export interface MaxPodsBreakdown {
  readonly instanceType: string;
  readonly prefixDelegation: boolean;
  readonly ipFamily: IpFamilySetting;
  readonly maxPods: number;
  readonly podEniSlots: number;
  readonly addressesPerPodEni: number;
  readonly hostNetworkPods: number;
  readonly capPods: number;
}

export function maxPodsBreakdown(limits: InstanceLimits, options: MaxPodsOptions): MaxPodsBreakdown {
  return {
    instanceType: limits.instanceType,
    prefixDelegation: options.prefixDelegation,
    ipFamily: options.ipFamily ?? 'ipv4',
    maxPods: maxPodsFor(limits, options),
    podEniSlots: podEniSlots(limits),
    addressesPerPodEni: addressesPerPodEni(limits, options.prefixDelegation, options.ipFamily),
    hostNetworkPods: options.hostNetworkPods ?? DEFAULT_HOST_NETWORK_PODS,
    capPods: options.capPods,
  };
}

/** `20` then `  = min(cap 110, 2 pod ENIs × 9 addresses + 2 host-network pods = 20)`. */
export function describeMaxPods(b: MaxPodsBreakdown): string[] {
  if (b.ipFamily === 'ipv6') {
    const pods = b.podEniSlots > 0 && b.addressesPerPodEni > 0;
    return [
      `${b.maxPods}`,
      pods
        ? `  = cap ${b.capPods} (${b.podEniSlots} pod ENIs, one /80 each: more addresses than any cap)`
        : `  = ${b.hostNetworkPods} host-network pods (no pod ENI can get a /80 on ${b.instanceType})`,
    ];
  }
  const uncapped = b.podEniSlots * b.addressesPerPodEni + b.hostNetworkPods;
  const prefixes = b.prefixDelegation ? ` (${b.addressesPerPodEni / ADDRESSES_PER_PREFIX} /28 prefixes × 16)` : '';
  return [
    `${b.maxPods}`,
    `  = min(cap ${b.capPods}, ${b.podEniSlots} pod ENIs × ${b.addressesPerPodEni} addresses${prefixes} + ${b.hostNetworkPods} host-network pods = ${uncapped})`,
  ];
}
