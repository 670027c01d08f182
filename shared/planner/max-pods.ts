import { ADDRESSES_PER_PREFIX, type InstanceLimits } from '../domain/limits.js';

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

/** Addresses one pod ENI can lease: its secondary addresses, or every address of its /28 prefixes. */
export function addressesPerPodEni(limits: InstanceLimits, prefixDelegation: boolean): number {
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
 */
export function maxPodsFor(limits: InstanceLimits, options: MaxPodsOptions): number {
  const hostNetworkPods = options.hostNetworkPods ?? DEFAULT_HOST_NETWORK_PODS;
  const vpcPods = podEniSlots(limits) * addressesPerPodEni(limits, options.prefixDelegation);
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
    maxPods: maxPodsFor(limits, options),
    podEniSlots: podEniSlots(limits),
    addressesPerPodEni: addressesPerPodEni(limits, options.prefixDelegation),
    hostNetworkPods: options.hostNetworkPods ?? DEFAULT_HOST_NETWORK_PODS,
    capPods: options.capPods,
  };
}

/** `20` then `  = min(cap 110, 2 pod ENIs × 9 addresses + 2 host-network pods = 20)`. */
export function describeMaxPods(b: MaxPodsBreakdown): string[] {
  const uncapped = b.podEniSlots * b.addressesPerPodEni + b.hostNetworkPods;
  const prefixes = b.prefixDelegation ? ` (${b.addressesPerPodEni / ADDRESSES_PER_PREFIX} /28 prefixes × 16)` : '';
  return [
    `${b.maxPods}`,
    `  = min(cap ${b.capPods}, ${b.podEniSlots} pod ENIs × ${b.addressesPerPodEni} addresses${prefixes} + ${b.hostNetworkPods} host-network pods = ${uncapped})`,
  ];
}
