import type { Lease } from '../domain/lease.js';

/**
 * The warm-pool arithmetic (cilium's `calculateNeededIPs` / `calculateExcessIPs`, adapted to leases): pure
 * functions of a node's lease counts and its targets, table-tested in test/pool/watermarks.test.ts.
 *
 * Vocabulary:
 * - claimableNow: FREE or COOLDOWN leases whose reusableAt has passed — what an ADD can take right now;
 * - coolingDown: released leases still inside their reuse wait — claimable within seconds, so counted as
 *   spare when sizing a top-up (or the pool would overshoot and release them again a few minutes later);
 * - held: every lease that is not RELEASING — the node's share of its ENIs' addresses.
 */
export interface PoolCounts {
  readonly claimableNow: number;
  readonly coolingDown: number;
  readonly claimed: number;
  readonly releasing: number;
  /** claimableNow leases that have been claimable for at least the release delay (release candidates). */
  readonly releasable: number;
}

export interface PoolTargets {
  /** Leases the node keeps whatever happens (the launch minimum). */
  readonly minLeases: number;
  /** Top up when claimableNow falls below this. 0 turns top-ups off (except to reach minLeases). */
  readonly warmLowLeases: number;
  /** Release excess when spare leases rise above this; top-ups aim at it. */
  readonly warmHighLeases: number;
  /** Never hold more leases than this (min of the configured max-pods and the node's own figure). */
  readonly maxLeases: number;
}

export function heldOf(counts: PoolCounts): number {
  return counts.claimed + counts.claimableNow + counts.coolingDown;
}

export function spareOf(counts: PoolCounts): number {
  return counts.claimableNow + counts.coolingDown;
}

/** Counts a node's leases at `nowMs`; `releaseDelayMs` is how long a lease must have been claimable to go. */
export function countPool(leases: readonly Lease[], nowMs: number, releaseDelayMs: number): PoolCounts {
  let claimableNow = 0;
  let coolingDown = 0;
  let claimed = 0;
  let releasing = 0;
  let releasable = 0;
  for (const lease of leases) {
    switch (lease.state) {
      case 'CLAIMED':
        claimed += 1;
        break;
      case 'RELEASING':
        releasing += 1;
        break;
      case 'FREE':
      case 'COOLDOWN': {
        const reusableAtMs = lease.reusableAtMs ?? 0;
        if (reusableAtMs > nowMs) coolingDown += 1;
        else {
          claimableNow += 1;
          if (reusableAtMs <= nowMs - releaseDelayMs) releasable += 1;
        }
        break;
      }
    }
  }
  return { claimableNow, coolingDown, claimed, releasing, releasable };
}

/**
 * Addresses to add. Nothing while claimableNow ≥ low and the minimum is held (the hysteresis band: between
 * the watermarks nothing moves). Below, the top-up is the largest of
 *   low − claimableNow            (claimable now must be back at the low watermark once the top-up lands),
 *   high − spare                  (aim at the high watermark, counting cooling-down leases as spare),
 *   minLeases − held              (the launch minimum),
 * capped at maxLeases − held.
 */
export function calculateNeededAddresses(counts: PoolCounts, targets: PoolTargets): number {
  const held = heldOf(counts);
  if (counts.claimableNow >= targets.warmLowLeases && held >= targets.minLeases) return 0;
  const wanted = Math.max(
    targets.warmLowLeases - counts.claimableNow,
    targets.warmHighLeases - spareOf(counts),
    targets.minLeases - held,
  );
  return Math.max(0, Math.min(wanted, targets.maxLeases - held));
}

/**
 * Addresses to release: spare − high, but
 * - never below minLeases held, and never so many that claimableNow drops under the low watermark (which
 *   would trigger a top-up at once — the flapping the band exists to prevent);
 * - more when the node holds more than maxLeases (the cap was lowered);
 * - only among the releasable leases (claimable for at least the release delay): a lease that was just put
 *   or just came out of cooldown may be wanted by the next pod.
 */
export function calculateExcessAddresses(counts: PoolCounts, targets: PoolTargets): number {
  const held = heldOf(counts);
  let excess = Math.min(
    spareOf(counts) - targets.warmHighLeases,
    held - targets.minLeases,
    counts.claimableNow - targets.warmLowLeases,
  );
  excess = Math.max(excess, held - targets.maxLeases);
  return Math.max(0, Math.min(excess, counts.releasable));
}
