import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ADDRESSES_PER_PREFIX } from '../../shared/domain/limits.js';
import { PlanError } from '../../shared/planner/errors.js';
import { freeEniSlots, type LaunchPlanInput, planLaunch } from '../../shared/planner/launch-plan.js';
import { maxPodsFor, podEniSlots } from '../../shared/planner/max-pods.js';
import { rankSubnets, type SubnetCandidate } from '../../shared/planner/subnets.js';
import { allInstanceTypes, limitsOf } from './support/limits.js';

const AZ = 'us-east-1a';
const subnet = (id: string, free: number, az = AZ): SubnetCandidate => ({
  subnetId: id,
  cidr: '10.0.0.0/24',
  availabilityZone: az,
  availableIpCount: free,
});
const BOOT = [{ deviceIndex: 0, networkCardIndex: 0 }];

function input(instanceType: string, overrides: Partial<LaunchPlanInput> = {}): LaunchPlanInput {
  return {
    limits: limitsOf(instanceType),
    availabilityZone: AZ,
    prefixDelegation: false,
    minLeases: 8,
    warmHighLeases: 16,
    maxPods: 110,
    subnets: [subnet('subnet-aaaaaaaa', 250)],
    existing: BOOT,
    ...overrides,
  };
}

describe('Function: maxPodsFor', () => {
  it.each([
    // (maxEnis − 1) × (ipv4PerEni − 1) + 2, capped at 110
    ['m5.large', false, 2 * 9 + 2],
    ['t3.medium', false, 2 * 5 + 2],
    ['c5.4xlarge', false, 110],
    ['t2.micro', false, 1 * 1 + 2],
    ['m5.large', true, 110],
    ['t3.medium', true, 110], // 2 × 5 × 16 + 2 = 162, capped
  ])('computes %s (prefix %s) as %i', (type, prefix, expected) => {
    expect(maxPodsFor(limitsOf(type), { prefixDelegation: prefix, capPods: 110 })).toBe(expected);
  });

  it('lets the configured cap go above 110 for large types', () => {
    expect(maxPodsFor(limitsOf('c5.4xlarge'), { prefixDelegation: false, capPods: 500 })).toBe(7 * 29 + 2);
  });

  it('never counts the boot ENI and respects per-card limits on every type of the catalogue', () => {
    for (const type of allInstanceTypes()) {
      const limits = limitsOf(type);
      const slots = podEniSlots(limits);
      expect(slots).toBeLessThanOrEqual(limits.maxEnis - 1);
      expect(freeEniSlots(limits, BOOT)).toHaveLength(slots);
    }
  });
});

describe('Function: freeEniSlots', () => {
  it('numbers device indexes from 1 and skips indexes already in use', () => {
    const slots = freeEniSlots(limitsOf('c5.4xlarge'), [...BOOT, { deviceIndex: 2, networkCardIndex: 0 }]);
    expect(slots.map((s) => s.deviceIndex)).toEqual([1, 3, 4, 5, 6, 7]);
  });

  it('fills the default card before the others on multi-card types', () => {
    const slots = freeEniSlots(limitsOf('c6in.32xlarge'), BOOT);
    const cards = slots.map((s) => s.networkCardIndex);
    expect(cards.indexOf(1) === -1 || cards.lastIndexOf(0) < cards.indexOf(1)).toBe(true);
    expect(new Set(slots.map((s) => s.deviceIndex)).size).toBe(slots.length);
    expect(slots.every((s) => s.deviceIndex >= 1)).toBe(true);
  });
});

describe('Function: planLaunch', () => {
  it.each([
    // type, minLeases, warmHigh, ENIs, ips per ENI
    ['m5.large', 8, 16, [9, 7]],
    ['c5.4xlarge', 8, 16, [16]],
    ['t3.medium', 8, 16, [5, 5]],
    ['t3.medium', 8, 8, [5, 3]],
    ['m5.large', 0, 1, [1]],
  ])('plans %s with minLeases %i and warmHigh %i as ENIs of %j addresses', (type, min, high, perEni) => {
    const plan = planLaunch(input(type, { minLeases: min, warmHighLeases: high }));
    expect(plan.enis.map((e) => e.ipCount)).toEqual(perEni);
    expect(plan.enis.map((e) => e.deviceIndex)).toEqual(perEni.map((_, i) => i + 1));
    expect(plan.enis.every((e) => e.prefixCount === 0)).toBe(true);
    expect(plan.leaseCount).toBe(perEni.reduce((a, b) => a + b, 0));
  });

  it('plans /28 prefixes in prefix mode and caps the leases at maxPods', () => {
    const plan = planLaunch(input('m5.large', { prefixDelegation: true, warmHighLeases: 20, maxPods: 24 }));
    expect(plan.enis).toEqual([expect.objectContaining({ deviceIndex: 1, ipCount: 0, prefixCount: 2 })]);
    expect(plan.leaseCount).toBe(24);
  });

  it('refuses prefix delegation off Nitro with a config error', () => {
    const err = (() => {
      try {
        planLaunch(input('t2.micro', { prefixDelegation: true, minLeases: 1, warmHighLeases: 1 }));
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(PlanError);
    expect((err as PlanError).kind).toBe('config');
  });

  it('fails with kind limits when the type cannot hold minLeases', () => {
    expect(() => planLaunch(input('t3.medium', { minLeases: 11, warmHighLeases: 11 }))).toThrow(
      expect.objectContaining({ kind: 'limits' }),
    );
  });

  it('puts each ENI in the subnet with most free addresses of the instance AZ and may share a subnet', () => {
    const plan = planLaunch(
      input('c5.4xlarge', {
        minLeases: 8,
        warmHighLeases: 60,
        subnets: [
          subnet('subnet-bbbbbbbb', 40),
          subnet('subnet-cccccccc', 31),
          subnet('subnet-dddddddd', 999, 'us-east-1b'),
        ],
      }),
    );
    expect(plan.enis.map((e) => [e.subnetId, e.ipCount])).toEqual([
      ['subnet-bbbbbbbb', 29],
      ['subnet-cccccccc', 29],
      ['subnet-bbbbbbbb', 2],
    ]);
  });

  it('asks a nearly full subnet for what it still has', () => {
    const plan = planLaunch(input('m5.large', { subnets: [subnet('subnet-aaaaaaaa', 12)] }));
    expect(plan.enis.map((e) => e.ipCount)).toEqual([9, 1]);
    expect(plan.leaseCount).toBe(10);
  });

  it('fails with kind subnets-exhausted when every candidate together has room for less than minLeases', () => {
    expect(() =>
      planLaunch(input('m5.large', { subnets: [subnet('subnet-aaaaaaaa', 4), subnet('subnet-bbbbbbbb', 3)] })),
    ).toThrow(expect.objectContaining({ kind: 'subnets-exhausted' }));
  });

  it('fails with kind config when no candidate subnet is in the instance AZ', () => {
    expect(() => planLaunch(input('m5.large', { subnets: [subnet('subnet-aaaaaaaa', 250, 'us-east-1b')] }))).toThrow(
      expect.objectContaining({ kind: 'config' }),
    );
  });

  it('keeps its invariants for any type, targets and subnets (property)', () => {
    const types = allInstanceTypes();
    fc.assert(
      fc.property(
        fc.constantFrom(...types),
        fc.boolean(),
        fc.integer({ min: 0, max: 64 }),
        fc.integer({ min: 1, max: 128 }),
        fc.integer({ min: 1, max: 250 }),
        fc.array(fc.integer({ min: 0, max: 300 }), { minLength: 1, maxLength: 4 }),
        (type, prefix, min, high, cap, frees) => {
          const limits = limitsOf(type);
          const subnets = frees.map((f, i) => subnet(`subnet-0000000${i}`, f));
          const args = input(type, {
            prefixDelegation: prefix,
            minLeases: Math.min(min, cap),
            warmHighLeases: high,
            maxPods: cap,
            subnets,
          });
          let plan: ReturnType<typeof planLaunch>;
          try {
            plan = planLaunch(args);
          } catch (err) {
            expect(err).toBeInstanceOf(PlanError);
            return;
          }
          const used = new Map<string, number>();
          for (const e of plan.enis) {
            expect(e.deviceIndex).toBeGreaterThanOrEqual(1);
            if (prefix) expect(e.prefixCount).toBeLessThanOrEqual(limits.ipv4PerEni - 1);
            else expect(e.ipCount).toBeLessThanOrEqual(limits.ipv4PerEni - 1);
            expect(e.ipCount + e.prefixCount).toBeGreaterThan(0);
            used.set(e.subnetId, (used.get(e.subnetId) ?? 0) + 1 + e.ipCount + e.prefixCount * ADDRESSES_PER_PREFIX);
          }
          for (const s of subnets) expect(used.get(s.subnetId) ?? 0).toBeLessThanOrEqual(s.availableIpCount);
          expect(new Set(plan.enis.map((e) => e.deviceIndex)).size).toBe(plan.enis.length);
          expect(plan.enis.length).toBeLessThanOrEqual(limits.maxEnis - 1);
          expect(plan.leaseCount).toBeGreaterThanOrEqual(args.minLeases);
          expect(plan.leaseCount).toBeLessThanOrEqual(cap);
          expect(plan.maxPods).toBeLessThanOrEqual(cap);
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('Function: rankSubnets', () => {
  it('keeps the instance AZ only, most free first, ties by id, no duplicates', () => {
    const ranked = rankSubnets(
      [
        subnet('subnet-b', 10),
        subnet('subnet-a', 10),
        subnet('subnet-c', 50),
        subnet('subnet-x', 99, 'us-east-1c'),
        subnet('subnet-c', 50),
      ],
      AZ,
    );
    expect(ranked.map((s) => s.subnetId)).toEqual(['subnet-c', 'subnet-a', 'subnet-b']);
  });
});
