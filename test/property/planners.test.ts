import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Lease } from '../../shared/domain/lease.js';
import { ADDRESSES_PER_PREFIX } from '../../shared/domain/limits.js';
import { PlanError } from '../../shared/planner/errors.js';
import { type LaunchPlanInput, planLaunch } from '../../shared/planner/launch-plan.js';
import { addressesPerPodEni, podEniSlots } from '../../shared/planner/max-pods.js';
import type { SubnetCandidate } from '../../shared/planner/subnets.js';
import { isReleasable, planRelease } from '../../shared/pool/release-plan.js';
import { planTopUp } from '../../shared/pool/topup-plan.js';
import {
  calculateExcessAddresses,
  calculateNeededAddresses,
  type PoolCounts,
  type PoolTargets,
} from '../../shared/pool/watermarks.js';
import { allInstanceTypes, limitsOf } from '../control-plane/support/limits.js';

const SEED = Number(process.env['VPC_LEASE_PROPERTY_SEED'] ?? 20261130);
const AZ = 'us-east-1a';

const instanceType = fc.constantFrom(...allInstanceTypes());
const subnet = (i: number): fc.Arbitrary<SubnetCandidate> =>
  fc.record({
    subnetId: fc.constant(`subnet-${String(i).padStart(17, '0')}`),
    cidr: fc.constant(`10.${i}.0.0/20`),
    availabilityZone: fc.constantFrom(AZ, AZ, 'us-east-1b'),
    availableIpCount: fc.oneof(fc.integer({ min: 0, max: 40 }), fc.integer({ min: 0, max: 4091 })),
  });
const subnets = fc
  .integer({ min: 0, max: 4 })
  .chain((n) => fc.tuple(...Array.from({ length: n }, (_, i) => subnet(i))));

const launchInput: fc.Arbitrary<LaunchPlanInput> = fc
  .record({
    type: instanceType,
    prefixDelegation: fc.boolean(),
    minLeases: fc.integer({ min: 0, max: 64 }),
    warmHighLeases: fc.integer({ min: 0, max: 128 }),
    maxPods: fc.integer({ min: 1, max: 250 }),
    subnets,
  })
  .map((r) => ({
    limits: limitsOf(r.type),
    availabilityZone: AZ,
    prefixDelegation: r.prefixDelegation,
    minLeases: r.minLeases,
    warmHighLeases: r.warmHighLeases,
    maxPods: r.maxPods,
    subnets: r.subnets,
    existing: [{ deviceIndex: 0, networkCardIndex: r.type.length >= 0 ? limitsOf(r.type).defaultNetworkCardIndex : 0 }],
  }));

describe('Property: launch planner', () => {
  it('plans at least minLeases within every instance and subnet limit, or refuses with a PlanError', () => {
    fc.assert(
      fc.property(launchInput, (input) => {
        let plan: ReturnType<typeof planLaunch>;
        try {
          plan = planLaunch(input);
        } catch (err) {
          expect(err).toBeInstanceOf(PlanError);
          return;
        }
        const perEni = addressesPerPodEni(input.limits, input.prefixDelegation);
        expect(plan.leaseCount).toBeGreaterThanOrEqual(input.minLeases);
        expect(plan.leaseCount).toBeLessThanOrEqual(input.maxPods);
        expect(plan.enis.length).toBeLessThanOrEqual(podEniSlots(input.limits));
        const indexes = plan.enis.map((e) => e.deviceIndex);
        expect(new Set(indexes).size).toBe(indexes.length);
        expect(indexes).not.toContain(0); // the boot ENI's slot is never planned
        const used = new Map<string, number>();
        let planned = 0;
        for (const eni of plan.enis) {
          expect(eni.ipCount === 0 || eni.prefixCount === 0).toBe(true);
          expect(eni.ipCount * (input.prefixDelegation ? 0 : 1) + eni.prefixCount).toBeGreaterThan(0);
          expect(eni.ipCount + eni.prefixCount).toBeLessThanOrEqual(input.limits.ipv4PerEni - 1);
          expect(eni.ipCount + eni.prefixCount * ADDRESSES_PER_PREFIX).toBeLessThanOrEqual(perEni);
          const candidate = input.subnets.find((s) => s.subnetId === eni.subnetId);
          expect(candidate?.availabilityZone).toBe(AZ); // an ENI cannot attach across AZs
          used.set(
            eni.subnetId,
            (used.get(eni.subnetId) ?? 0) + 1 + eni.ipCount + eni.prefixCount * ADDRESSES_PER_PREFIX,
          );
          planned += eni.ipCount + eni.prefixCount * ADDRESSES_PER_PREFIX;
        }
        expect(planned).toBeGreaterThanOrEqual(plan.leaseCount);
        for (const [id, n] of used)
          expect(n).toBeLessThanOrEqual(input.subnets.find((s) => s.subnetId === id)!.availableIpCount);
      }),
      { numRuns: 2000, seed: SEED },
    );
  });

  it('is deterministic and blind to the order subnets are listed in (a resumed launch plans the same)', () => {
    fc.assert(
      fc.property(launchInput, fc.integer(), (input, salt) => {
        const reordered = { ...input, subnets: [...input.subnets].sort(() => (salt & 1 ? 1 : -1)).reverse() };
        const run = (i: LaunchPlanInput): unknown => {
          try {
            return planLaunch(i);
          } catch (err) {
            return (err as PlanError).kind;
          }
        };
        expect(run(reordered)).toEqual(run(input));
      }),
      { numRuns: 500, seed: SEED },
    );
  });
});

describe('Property: pool top-up planner', () => {
  it('fills existing ENIs within their free slots and plans new ones only in free device indexes', () => {
    fc.assert(
      fc.property(
        instanceType,
        fc.boolean(),
        fc.integer({ min: 0, max: 200 }),
        subnets,
        fc.integer({ min: 0, max: 3 }),
        fc.array(fc.nat(), { maxLength: 8 }),
        (type, prefixDelegation, needed, subs, enisWanted, fills) => {
          const limits = limitsOf(type);
          const slots = Math.max(0, limits.ipv4PerEni - 1);
          const count = Math.min(enisWanted, podEniSlots(limits));
          const enis = Array.from({ length: count }, (_, i) => ({
            eniId: `eni-${String(i).padStart(17, '0')}`,
            deviceIndex: i + 1,
            subnetId: subs[0]?.subnetId ?? 'subnet-unknown',
            slotsUsed: slots === 0 ? 0 : (fills[i] ?? 0) % (slots + 1),
          }));
          const interfaces = [
            { deviceIndex: 0, networkCardIndex: limits.defaultNetworkCardIndex },
            ...enis.map((e) => ({ deviceIndex: e.deviceIndex, networkCardIndex: limits.defaultNetworkCardIndex })),
          ];
          const input = { needed, limits, prefixDelegation, availabilityZone: AZ, enis, interfaces, subnets: subs };
          let plan: ReturnType<typeof planTopUp>;
          try {
            plan = planTopUp(input);
          } catch (err) {
            // Only a configuration that cannot work on this type (prefixes off Nitro) may be refused, as at launch.
            expect(err).toBeInstanceOf(PlanError);
            expect((err as PlanError).kind).toBe('config');
            expect(prefixDelegation && limits.hypervisor !== 'nitro').toBe(true);
            return;
          }
          const unit = prefixDelegation ? ADDRESSES_PER_PREFIX : 1;
          for (const step of plan.assign) {
            const eni = enis.find((e) => e.eniId === step.eniId)!;
            expect(step.ipCount + step.prefixCount).toBeGreaterThan(0);
            expect(eni.slotsUsed + step.ipCount + step.prefixCount).toBeLessThanOrEqual(slots);
            expect(prefixDelegation ? step.ipCount : step.prefixCount).toBe(0);
          }
          const taken = new Set(interfaces.map((i) => i.deviceIndex));
          for (const eni of plan.newEnis) expect(taken.has(eni.deviceIndex)).toBe(false);
          const units =
            plan.assign.reduce((s, a) => s + a.ipCount + a.prefixCount, 0) +
            plan.newEnis.reduce((s, e) => s + e.ipCount + e.prefixCount, 0);
          expect(units * unit).toBe(plan.plannedAddresses);
          // Never more than one unit past what was asked; short only by what is reported as shortfall.
          expect(plan.plannedAddresses).toBeLessThan(needed + unit);
          expect(plan.plannedAddresses + plan.shortfall).toBeGreaterThanOrEqual(needed);
        },
      ),
      { numRuns: 2000, seed: SEED },
    );
  });
});

const counts: fc.Arbitrary<PoolCounts> = fc
  .record({
    claimableNow: fc.integer({ min: 0, max: 120 }),
    coolingDown: fc.integer({ min: 0, max: 40 }),
    claimed: fc.integer({ min: 0, max: 120 }),
    releasing: fc.integer({ min: 0, max: 10 }),
    releasableShare: fc.double({ min: 0, max: 1, noNaN: true }),
  })
  .map(({ releasableShare, ...c }) => ({ ...c, releasable: Math.floor(c.claimableNow * releasableShare) }));

const targets: fc.Arbitrary<PoolTargets> = fc
  .tuple(fc.nat(64), fc.nat(64), fc.nat(64), fc.integer({ min: 1, max: 250 }))
  .map(([a, b, c, max]) => {
    const [low, high] = a <= b ? [a, b] : [b, a];
    return {
      minLeases: Math.min(c, max),
      warmLowLeases: Math.min(low, max),
      warmHighLeases: Math.min(high, max),
      maxLeases: max,
    };
  });

describe('Property: pool watermarks', () => {
  it('never tops up and releases at once, never passes maxLeases, never drops below minLeases or the low mark', () => {
    fc.assert(
      fc.property(counts, targets, (c, t) => {
        const held = c.claimed + c.claimableNow + c.coolingDown;
        const needed = calculateNeededAddresses(c, t);
        const excess = calculateExcessAddresses(c, t);
        expect(needed > 0 && excess > 0).toBe(false);
        expect(excess).toBeLessThanOrEqual(c.releasable);
        if (needed > 0) expect(held + needed).toBeLessThanOrEqual(t.maxLeases);
        if (excess > 0 && held <= t.maxLeases) {
          expect(held - excess).toBeGreaterThanOrEqual(t.minLeases);
          expect(c.claimableNow - excess).toBeGreaterThanOrEqual(t.warmLowLeases);
        }
      }),
      { numRuns: 5000, seed: SEED },
    );
  });

  it('does not flap: once a top-up lands, nothing is released', () => {
    fc.assert(
      fc.property(counts, targets, (c, t) => {
        const needed = calculateNeededAddresses(c, t);
        // Fresh addresses are claimable at once but not releasable for the release delay.
        const after = { ...c, claimableNow: c.claimableNow + needed };
        if (needed > 0) expect(calculateExcessAddresses(after, t)).toBe(0);
      }),
      { numRuns: 5000, seed: SEED },
    );
  });
});

const NOW = 1_700_000_000_000;
const leaseArb = (i: number): fc.Arbitrary<Lease> =>
  fc
    .record({
      state: fc.constantFrom('FREE', 'COOLDOWN', 'CLAIMED', 'RELEASING') as fc.Arbitrary<Lease['state']>,
      ageMs: fc.integer({ min: -60_000, max: 900_000 }),
      eni: fc.integer({ min: 0, max: 2 }),
      prefixed: fc.boolean(),
    })
    .map(({ state, ageMs, eni, prefixed }) => ({
      instanceArn: 'arn:aws:ec2:us-east-1:123456789012:instance/i-0123456789abcdef0',
      ip: `10.1.${eni}.${16 + i}`,
      state,
      eniId: `eni-${eni}`,
      deviceIndex: eni + 1,
      mac: '02:00:00:00:00:01',
      subnetId: 'subnet-1',
      subnetCidr: '10.1.0.0/16',
      gateway: '10.1.0.1',
      ...(prefixed ? { prefix: `10.1.${eni}.16/28` } : {}),
      createdAtMs: NOW - 1_000_000,
      ...(state === 'FREE' || state === 'COOLDOWN' ? { reusableAtMs: NOW - ageMs } : {}),
      ...(state === 'CLAIMED' ? { holder: { containerId: `c${i}`, ifName: 'eth0', netns: '/n' } } : {}),
      version: 1,
    }));

describe('Property: release planner', () => {
  it('releases at most the excess, only releasable leases, and delegated prefixes only whole', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 12 }).chain((n) => fc.tuple(...Array.from({ length: n }, (_, i) => leaseArb(i)))),
        fc.integer({ min: 0, max: 20 }),
        fc.constantFrom(0, 300_000),
        (leases, excess, releaseDelayMs) => {
          const groups = planRelease(leases, excess, NOW, releaseDelayMs);
          const ips = groups.flatMap((g) => g.ips);
          expect(ips.length).toBeLessThanOrEqual(excess);
          expect(new Set(ips).size).toBe(ips.length);
          for (const ip of ips) expect(isReleasable(leases.find((l) => l.ip === ip)!, NOW, releaseDelayMs)).toBe(true);
          for (const g of groups) {
            for (const ip of g.ips) expect(leases.find((l) => l.ip === ip)!.eniId).toBe(g.eniId);
            if (g.prefix !== undefined) {
              const members = leases.filter((l) => l.eniId === g.eniId && l.prefix === g.prefix).map((l) => l.ip);
              expect([...g.ips].sort()).toEqual(members.sort());
            } else for (const ip of g.ips) expect(leases.find((l) => l.ip === ip)!.prefix).toBeUndefined();
          }
        },
      ),
      { numRuns: 3000, seed: SEED },
    );
  });
});
