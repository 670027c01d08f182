import type { Lease, LeaseHolder } from '../domain/lease.js';
import { errorMessage, StoreUnavailableError } from '../errors.js';
import type { IpFamily } from '../ipv6.js';
import type { ClaimOptions, LeaseStore } from './port.js';

/** What a node hands out per pod: `ipv4` (the default), `ipv6`, or one of each on the same ENI (`dual`). */
export type PodIpFamily = IpFamily | 'dual';

/** A pod's leases: IPv4 first when it has one. One lease in `ipv4` and `ipv6`, two in `dual`. */
export type PodLeases = readonly [Lease] | readonly [Lease, Lease];

/** Called between a dual claim's two writes; tests fail or stop there. */
export type BetweenClaims = (first: Lease) => void | Promise<void>;

/**
 * Claims what a pod of `family` gets. A dual pod's two leases are two conditional writes (no transactions,
 * DESIGN.md): the IPv4 lease first, then an IPv6 lease on the same ENI. When the second fails, the first goes
 * back to claimable at once (released with no cooldown: no packet ever used it) and the error is rethrown, so
 * the caller holds both or neither. A crash between the two leaves the first CLAIMED by the holder: the repeated
 * ADD (checkExisting finds it, per family) completes the pair, DEL releases it, GC returns it.
 */
export async function claimPodLeases(
  store: LeaseStore,
  instanceArn: string,
  holder: LeaseHolder,
  nowMs: number,
  family: PodIpFamily,
  options: ClaimOptions = {},
  betweenClaims?: BetweenClaims,
): Promise<PodLeases> {
  if (family === 'ipv4') return [await store.claim(instanceArn, holder, nowMs, options)];
  if (family === 'ipv6') return [await store.claim(instanceArn, holder, nowMs, { ...options, family: 'ipv6' })];
  const v4 = await store.claim(instanceArn, holder, nowMs, { ...options, family: 'ipv4' });
  try {
    await betweenClaims?.(v4);
    const v6 = await store.claim(instanceArn, holder, nowMs, { ...options, family: 'ipv6', eniId: v4.eniId });
    return [v4, v6];
  } catch (err) {
    try {
      await store.release(instanceArn, holder, nowMs, 0, v4.ip);
    } catch (undoErr) {
      // The IPv4 lease stays CLAIMED by this holder. The store's failure is the one to report: the caller then
      // gives back what the holder has, or keeps its intent so the next ADD or DEL looks the holder up.
      if (undoErr instanceof StoreUnavailableError)
        throw new StoreUnavailableError(
          `${errorMessage(err)}; and ${v4.ip}, claimed first, could not be given back: ${errorMessage(undoErr)}`,
        );
      throw undoErr;
    }
    throw err;
  }
}

/** The leases a holder already has, by family: a repeated ADD or DEL of a `family` pod. */
export async function findPodLeases(
  store: LeaseStore,
  instanceArn: string,
  containerId: string,
  ifName: string,
  family: PodIpFamily,
): Promise<Lease[]> {
  if (family === 'ipv4') return compact([await store.findByHolder(instanceArn, containerId, ifName)]);
  if (family === 'ipv6') return compact([await store.findByHolder(instanceArn, containerId, ifName, 'ipv6')]);
  const [v4, v6] = await Promise.all([
    store.findByHolder(instanceArn, containerId, ifName, 'ipv4'),
    store.findByHolder(instanceArn, containerId, ifName, 'ipv6'),
  ]);
  return compact([v4, v6]);
}

function compact(leases: (Lease | undefined)[]): Lease[] {
  return leases.filter((l): l is Lease => l !== undefined);
}
