import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Lease, LeaseState } from '../../shared/domain/lease.js';
import {
  calculateExcessAddresses,
  calculateNeededAddresses,
  countPool,
  heldOf,
  type PoolCounts,
  type PoolTargets,
} from '../../shared/pool/watermarks.js';

const targets: PoolTargets = { minLeases: 8, warmLowLeases: 4, warmHighLeases: 16, maxLeases: 110 };

function counts(partial: Partial<PoolCounts>): PoolCounts {
  return { claimableNow: 0, coolingDown: 0, claimed: 0, releasing: 0, releasable: 0, ...partial };
}

function lease(ip: string, state: LeaseState, reusableAtMs?: number): Lease {
  return {
    instanceArn: 'arn:aws:ec2:eu-west-1:123456789012:instance/i-0123456789abcdef0',
    ip,
    state,
    eniId: 'eni-1',
    deviceIndex: 1,
    mac: '02:00:00:00:00:01',
    subnetId: 'subnet-1',
    subnetCidr: '10.0.0.0/24',
    gateway: '10.0.0.1',
    createdAtMs: 0,
    ...(reusableAtMs !== undefined ? { reusableAtMs } : {}),
    version: 1,
  };
}

describe('countPool', () => {
  it('splits leases by state, cooldown and release delay', () => {
    const now = 1_000_000;
    const leases = [
      lease('10.0.0.10', 'FREE', now - 600_000), // claimable and idle long enough to release
      lease('10.0.0.11', 'FREE', now - 1_000), // claimable, too recent to release
      lease('10.0.0.12', 'COOLDOWN', now + 5_000), // still cooling down
      lease('10.0.0.13', 'COOLDOWN', now - 400_000), // cooled down long ago
      lease('10.0.0.14', 'CLAIMED'),
      lease('10.0.0.15', 'RELEASING'),
    ];
    expect(countPool(leases, now, 300_000)).toEqual({
      claimableNow: 3,
      coolingDown: 1,
      claimed: 1,
      releasing: 1,
      releasable: 2,
    });
  });
});

describe('calculateNeededAddresses', () => {
  it.each([
    // name, counts, expected
    ['nothing inside the band', counts({ claimableNow: 10, claimed: 20 }), 0],
    ['nothing exactly at the low watermark', counts({ claimableNow: 4, claimed: 20 }), 0],
    ['up to high when below low', counts({ claimableNow: 3, claimed: 20 }), 13],
    ['cooling-down leases count as spare', counts({ claimableNow: 2, coolingDown: 10, claimed: 20 }), 4],
    ['back to low even when cooling fills the band', counts({ claimableNow: 0, coolingDown: 20, claimed: 20 }), 4],
    ['the minimum on an empty node', counts({}), 16],
    ['the minimum even above low', counts({ claimableNow: 5, claimed: 0 }), 11],
    ['capped by maxLeases', counts({ claimableNow: 0, claimed: 105 }), 5],
    ['nothing at maxLeases', counts({ claimableNow: 0, claimed: 110 }), 0],
    ['releasing leases do not count as held', counts({ claimableNow: 3, claimed: 20, releasing: 7 }), 13],
  ])('adds %s', (_name, c, expected) => {
    expect(calculateNeededAddresses(c, targets)).toBe(expected);
  });

  it('tops up to reach minLeases when the watermarks are off', () => {
    const off: PoolTargets = { minLeases: 8, warmLowLeases: 0, warmHighLeases: 0, maxLeases: 110 };
    expect(calculateNeededAddresses(counts({ claimed: 6 }), off)).toBe(2);
    expect(calculateNeededAddresses(counts({ claimed: 30 }), off)).toBe(0);
  });
});

describe('calculateExcessAddresses', () => {
  it.each([
    ['nothing inside the band', counts({ claimableNow: 16, claimed: 10, releasable: 16 }), 0],
    ['spare above high', counts({ claimableNow: 20, claimed: 10, releasable: 20 }), 4],
    ['only releasable leases', counts({ claimableNow: 20, claimed: 10, releasable: 1 }), 1],
    ['never below minLeases', counts({ claimableNow: 20, claimed: 0, releasable: 20 }), 4],
    [
      'never under low because of cooling leases',
      counts({ claimableNow: 6, coolingDown: 14, claimed: 10, releasable: 6 }),
      2,
    ],
    ['down to maxLeases when over the cap', counts({ claimableNow: 10, claimed: 110, releasable: 10 }), 10],
    ['no releasable, nothing', counts({ claimableNow: 40, claimed: 10, releasable: 0 }), 0],
  ])('releases %s', (_name, c, expected) => {
    expect(calculateExcessAddresses(c, targets)).toBe(expected);
  });

  it('keeps minLeases when min is above high', () => {
    const t: PoolTargets = { minLeases: 30, warmLowLeases: 4, warmHighLeases: 16, maxLeases: 110 };
    expect(calculateExcessAddresses(counts({ claimableNow: 25, claimed: 0, releasable: 25 }), t)).toBe(0);
    expect(calculateExcessAddresses(counts({ claimableNow: 25, claimed: 10, releasable: 25 }), t)).toBe(5);
  });
});

describe('watermark invariants', () => {
  const arbTargets = fc
    .record({
      minLeases: fc.integer({ min: 0, max: 40 }),
      warmLowLeases: fc.integer({ min: 0, max: 30 }),
      band: fc.integer({ min: 0, max: 30 }),
      maxLeases: fc.integer({ min: 1, max: 120 }),
    })
    .filter((t) => t.minLeases <= t.maxLeases)
    .map(
      (t): PoolTargets => ({
        minLeases: t.minLeases,
        warmLowLeases: t.warmLowLeases,
        warmHighLeases: t.warmLowLeases + t.band,
        maxLeases: t.maxLeases,
      }),
    );
  const arbCounts = fc
    .record({
      claimableNow: fc.integer({ min: 0, max: 80 }),
      coolingDown: fc.integer({ min: 0, max: 40 }),
      claimed: fc.integer({ min: 0, max: 120 }),
      releasing: fc.integer({ min: 0, max: 10 }),
      releasableShare: fc.integer({ min: 0, max: 100 }),
    })
    .map(
      (c): PoolCounts => ({
        claimableNow: c.claimableNow,
        coolingDown: c.coolingDown,
        claimed: c.claimed,
        releasing: c.releasing,
        releasable: Math.floor((c.claimableNow * c.releasableShare) / 100),
      }),
    );

  it('never adds and releases at once, and never crosses the cap, the minimum or the low watermark', () => {
    fc.assert(
      fc.property(arbCounts, arbTargets, (c, t) => {
        const needed = calculateNeededAddresses(c, t);
        const excess = calculateExcessAddresses(c, t);
        expect(needed === 0 || excess === 0).toBe(true);
        expect(needed).toBeGreaterThanOrEqual(0);
        expect(excess).toBeLessThanOrEqual(c.releasable);
        // A top-up never takes the node past its cap.
        expect(heldOf(c) + needed).toBeLessThanOrEqual(Math.max(t.maxLeases, heldOf(c)));
        // Unless the cap forces it, a release never takes claimable-now under low or held under the minimum.
        if (heldOf(c) <= t.maxLeases && excess > 0) {
          expect(c.claimableNow - excess).toBeGreaterThanOrEqual(t.warmLowLeases);
          expect(heldOf(c) - excess).toBeGreaterThanOrEqual(t.minLeases);
        }
        // A top-up that is not capped brings claimable-now back to the low watermark and held to the minimum.
        if (needed > 0 && heldOf(c) + needed < t.maxLeases) {
          expect(c.claimableNow + needed).toBeGreaterThanOrEqual(t.warmLowLeases);
          expect(heldOf(c) + needed).toBeGreaterThanOrEqual(t.minLeases);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('is stable: after a top-up lands, no release is due before the leases idle', () => {
    fc.assert(
      fc.property(arbCounts, arbTargets, (c, t) => {
        const needed = calculateNeededAddresses(c, t);
        if (needed === 0) return;
        // New leases are claimable at once but not releasable (the release delay has not passed).
        const after: PoolCounts = { ...c, claimableNow: c.claimableNow + needed };
        expect(calculateNeededAddresses(after, t)).toBe(0);
      }),
      { numRuns: 2000 },
    );
  });
});
