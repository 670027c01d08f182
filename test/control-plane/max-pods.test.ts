import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { nodeMaxPods } from '../../node/max-pods/figure.js';
import { shippedInstanceLimits } from '../../node/max-pods/instance-types.js';
import { loadInstanceTypes } from '../../shared/data/catalog.js';
import { expandInstanceRows, type InstanceTypeTable, instanceTypeRows } from '../../shared/domain/instance-types.js';
import { PlanError } from '../../shared/planner/errors.js';
import { planLaunch } from '../../shared/planner/launch-plan.js';
import { describeMaxPods, leaseCapFor, maxPodsBreakdown, maxPodsFor } from '../../shared/planner/max-pods.js';
import { calculateExcessAddresses, calculateNeededAddresses } from '../../shared/pool/watermarks.js';
import { allInstanceTypes, limitsOf } from './support/limits.js';

describe('Function: maxPodsFor (one figure for kubelet, the pool and the operator)', () => {
  // Each expected value is worked out by hand from shared/data/ec2-instance-types.json:
  //   figure = min(cap, podEnis × addressesPerPodEni + 2 host-network pods)
  //   podEnis = every ENI but the boot ENI; addressesPerPodEni = ipv4PerEni − 1 (the primary stays with the
  //   ENI), × 16 with prefix delegation (each /28 takes one address slot).
  it.each([
    // m5.large: 3 ENIs, 10 IPv4 each → 2 pod ENIs × 9 + 2 = 20 (EKS's formula says 3 × 9 + 2 = 29).
    ['m5.large', false, 110, 20],
    // t3.micro: 2 ENIs, 2 IPv4 each → 1 pod ENI × 1 + 2 = 3.
    ['t3.micro', false, 110, 3],
    // t3.micro with prefixes: 1 pod ENI × (1 slot × 16) + 2 = 18.
    ['t3.micro', true, 110, 18],
    // m5.large with prefixes: 2 × (9 × 16) + 2 = 290, so the cap decides: 110, or 250 with cap 250.
    ['m5.large', true, 110, 110],
    ['m5.large', true, 250, 250],
    // hpc6id.32xlarge: 1 ENI (the boot ENI) → 0 pod ENIs → only the 2 host-network pods.
    ['hpc6id.32xlarge', false, 110, 2],
    // c6in.32xlarge: 2 cards of 8 ENIs but 8 across the instance → 7 pod ENIs × 49 + 2 = 345 → cap 500 keeps it.
    ['c6in.32xlarge', false, 500, 345],
  ])('%s (prefix delegation %s, cap %i) gets %i', (type, prefixDelegation, capPods, expected) => {
    expect(maxPodsFor(limitsOf(type), { prefixDelegation, capPods })).toBe(expected);
  });

  it.each([
    // ipv6: each pod ENI's /80 outnumbers any cap, so the cap decides (EKS IPv6 clusters: 110, or 250).
    ['m5.large', 'ipv6', 110, 110],
    ['m5.large', 'ipv6', 250, 250],
    ['t3.micro', 'ipv6', 110, 110],
    // A Xen type gets no /80 at all: only the host-network pods.
    ['m4.large', 'ipv6', 110, 2],
    // No pod ENI: only the host-network pods, whatever the family.
    ['hpc6id.32xlarge', 'ipv6', 110, 2],
    // dual: every pod needs an IPv4 lease too, so the IPv4 figure holds (m5.large 2 × 9 + 2).
    ['m5.large', 'dual', 110, 20],
    ['t3.micro', 'ipv4', 110, 3],
  ] as const)('%s in %s (cap %i) gets %i', (type, ipFamily, capPods, expected) => {
    expect(maxPodsFor(limitsOf(type), { prefixDelegation: false, capPods, ipFamily })).toBe(expected);
  });

  it('the operator CLI, the node and the planner give one ipv6 figure', async () => {
    const limits = limitsOf('m5.large');
    const plan = planLaunch({
      limits,
      availabilityZone: 'us-east-1a',
      prefixDelegation: false,
      ipFamily: 'ipv6',
      minLeases: 1,
      warmHighLeases: 4,
      maxPods: 110,
      subnets: [
        {
          subnetId: 'subnet-1',
          cidr: '10.0.0.0/20',
          ipv6Cidr: '2600:1f18:0:1::/64',
          availabilityZone: 'us-east-1a',
          availableIpCount: 4000,
        },
      ],
      existing: [{ deviceIndex: 0, networkCardIndex: 0 }],
    });
    expect(plan.maxPods).toBe(110);
    expect(nodeMaxPods('m5.large', { prefixDelegation: false, maxPodsCap: 110, ipFamily: 'ipv6' }).maxPods).toBe(110);
    expect(nodeMaxPods('m5.large', { prefixDelegation: false, maxPodsCap: 110 }).maxPods).toBe(20);
    const b = maxPodsBreakdown(limits, { prefixDelegation: false, capPods: 110, ipFamily: 'ipv6' });
    expect(describeMaxPods(b)).toEqual(['110', '  = cap 110 (2 pod ENIs, one /80 each: more addresses than any cap)']);
  });

  it('leaseCapFor: the recorded figure, unless the cap is lower; the cap alone before a figure is recorded', () => {
    expect(leaseCapFor(20, 110)).toBe(20);
    expect(leaseCapFor(110, 12)).toBe(12);
    expect(leaseCapFor(0, 110)).toBe(110);
  });

  it("the node binary's compact table gives every type the limits the simulator and the planners use", () => {
    const raw = JSON.parse(
      readFileSync(new URL('../../shared/data/ec2-instance-types.json', import.meta.url), 'utf8'),
    ) as InstanceTypeTable;
    // The rows the build embeds turn back into the very table…
    expect(expandInstanceRows(instanceTypeRows(raw)).instanceTypes).toEqual(raw.instanceTypes);
    // …and the node's lookup agrees with the simulator's catalogue type by type.
    const catalog = loadInstanceTypes();
    expect(catalog.size).toBe(allInstanceTypes().length);
    for (const [type, limits] of catalog) expect(shippedInstanceLimits(type)).toEqual(limits);
    expect(shippedInstanceLimits('x9.huge')).toBeUndefined();
  });
});

describe('Property: the pool plan never exceeds max-pods', () => {
  const types = allInstanceTypes();

  it('a launch plans at most the figure it records', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...types),
        fc.boolean(),
        fc.integer({ min: 1, max: 400 }),
        fc.integer({ min: 0, max: 64 }),
        fc.integer({ min: 1, max: 512 }),
        fc.integer({ min: 0, max: 4000 }),
        (type, prefixDelegation, capPods, min, high, free) => {
          const limits = limitsOf(type);
          let plan: ReturnType<typeof planLaunch>;
          try {
            plan = planLaunch({
              limits,
              availabilityZone: 'us-east-1a',
              prefixDelegation,
              minLeases: Math.min(min, capPods),
              warmHighLeases: high,
              maxPods: capPods,
              subnets: [
                {
                  subnetId: 'subnet-0000000a',
                  cidr: '10.0.0.0/20',
                  availabilityZone: 'us-east-1a',
                  availableIpCount: free,
                },
              ],
              existing: [{ deviceIndex: 0, networkCardIndex: 0 }],
            });
          } catch (err) {
            expect(err).toBeInstanceOf(PlanError);
            return;
          }
          const figure = maxPodsFor(limits, { prefixDelegation, capPods });
          expect(plan.maxPods).toBe(figure);
          expect(plan.leaseCount).toBeLessThanOrEqual(figure);
        },
      ),
      { numRuns: 400 },
    );
  });

  it('the watermarks never take a node past its figure, and bring one above it back down', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 300 }), // recorded figure
        fc.integer({ min: 1, max: 300 }), // configured cap now
        fc.record({
          claimableNow: fc.integer({ min: 0, max: 300 }),
          coolingDown: fc.integer({ min: 0, max: 50 }),
          claimed: fc.integer({ min: 0, max: 300 }),
          releasing: fc.integer({ min: 0, max: 10 }),
        }),
        fc.integer({ min: 0, max: 64 }),
        fc.integer({ min: 0, max: 128 }),
        fc.integer({ min: 1, max: 256 }),
        (figure, capPods, c, minLeases, low, high) => {
          const counts = { ...c, releasable: c.claimableNow };
          const targets = {
            minLeases,
            warmLowLeases: Math.min(low, high),
            warmHighLeases: high,
            maxLeases: leaseCapFor(figure, capPods),
          };
          const held = c.claimed + c.claimableNow + c.coolingDown;
          const needed = calculateNeededAddresses(counts, targets);
          if (needed > 0) expect(held + needed).toBeLessThanOrEqual(figure);
          const excess = calculateExcessAddresses(counts, targets);
          // Only claimable leases can go; with enough of them the node ends at or under its figure.
          if (held > figure && c.claimableNow >= held - figure) expect(held - excess).toBeLessThanOrEqual(figure);
        },
      ),
      { numRuns: 2000 },
    );
  });
});
