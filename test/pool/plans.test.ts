import { describe, expect, it } from 'vitest';
import type { Lease, LeaseState } from '../../shared/domain/lease.js';
import type { InstanceLimits } from '../../shared/domain/limits.js';
import { eniClientToken } from '../../shared/ec2/tags.js';
import { addressesOf } from '../../shared/ipv4.js';
import { poolEniClientToken } from '../../shared/pool/new-eni.js';
import { planRelease } from '../../shared/pool/release-plan.js';
import { planTopUp } from '../../shared/pool/topup-plan.js';

const NOW = 10_000_000;
const DELAY = 300_000;

function lease(ip: string, state: LeaseState, reusableAtMs: number, extra: Partial<Lease> = {}): Lease {
  return {
    instanceArn: 'arn:aws:ec2:eu-west-1:123456789012:instance/i-0123456789abcdef0',
    ip,
    state,
    eniId: 'eni-a',
    deviceIndex: 1,
    mac: '02:00:00:00:00:01',
    subnetId: 'subnet-1',
    subnetCidr: '10.0.0.0/16',
    gateway: '10.0.0.1',
    createdAtMs: 0,
    ...(state === 'FREE' || state === 'COOLDOWN' ? { reusableAtMs } : {}),
    version: 1,
    ...extra,
  };
}

describe('planRelease', () => {
  it('releases only idle FREE or COOLDOWN leases, longest idle first, grouped per ENI', () => {
    const leases = [
      lease('10.0.0.20', 'FREE', NOW - 900_000),
      lease('10.0.0.21', 'FREE', NOW - 100_000), // too recent
      lease('10.0.0.22', 'CLAIMED', 0),
      lease('10.0.0.23', 'RELEASING', 0),
      lease('10.0.0.24', 'COOLDOWN', NOW - 2_000_000, { eniId: 'eni-b' }),
      lease('10.0.0.25', 'FREE', NOW - 400_000),
    ];
    const groups = planRelease(leases, 2, NOW, DELAY);
    expect(groups).toEqual([
      { eniId: 'eni-b', ips: ['10.0.0.24'] },
      { eniId: 'eni-a', ips: ['10.0.0.20'] },
    ]);
    const all = planRelease(leases, 10, NOW, DELAY).flatMap((g) => g.ips);
    expect(all.sort()).toEqual(['10.0.0.20', '10.0.0.24', '10.0.0.25']);
  });

  it('releases nothing for no excess', () => {
    expect(planRelease([lease('10.0.0.20', 'FREE', 0)], 0, NOW, DELAY)).toEqual([]);
  });

  it('releases a prefix only whole and only when every lease of it is idle', () => {
    const p1 = addressesOf('10.0.1.0/28').map((ip) => lease(ip, 'FREE', NOW - 900_000, { prefix: '10.0.1.0/28' }));
    const p2 = addressesOf('10.0.2.0/28').map((ip, i) =>
      lease(ip, i === 3 ? 'CLAIMED' : 'FREE', NOW - 900_000, { prefix: '10.0.2.0/28' }),
    );
    const p3 = addressesOf('10.0.3.0/28').map((ip) => lease(ip, 'FREE', NOW - 800_000, { prefix: '10.0.3.0/28' }));
    expect(planRelease([...p1, ...p2, ...p3], 15, NOW, DELAY)).toEqual([]);
    const groups = planRelease([...p1, ...p2, ...p3], 20, NOW, DELAY);
    expect(groups).toHaveLength(1);
    expect(groups[0]?.prefix).toBe('10.0.1.0/28');
    expect(groups[0]?.ips).toHaveLength(16);
    const both = planRelease([...p1, ...p2, ...p3], 40, NOW, DELAY).map((g) => g.prefix);
    expect(both).toEqual(['10.0.1.0/28', '10.0.3.0/28']);
  });
});

const m5large: InstanceLimits = {
  instanceType: 'm5.large',
  maxEnis: 3,
  ipv4PerEni: 10,
  defaultNetworkCardIndex: 0,
  networkCards: [{ networkCardIndex: 0, maxEnis: 3 }],
  hypervisor: 'nitro',
};

const subnets = [{ subnetId: 'subnet-1', cidr: '10.0.0.0/16', availabilityZone: 'eu-west-1a', availableIpCount: 1000 }];

describe('planTopUp', () => {
  it('fills the existing ENI first', () => {
    const plan = planTopUp({
      needed: 5,
      limits: m5large,
      prefixDelegation: false,
      availabilityZone: 'eu-west-1a',
      enis: [{ eniId: 'eni-a', deviceIndex: 1, subnetId: 'subnet-1', slotsUsed: 3 }],
      interfaces: [
        { deviceIndex: 0, networkCardIndex: 0 },
        { deviceIndex: 1, networkCardIndex: 0 },
      ],
      subnets,
    });
    expect(plan).toEqual({
      assign: [{ eniId: 'eni-a', ipCount: 5, prefixCount: 0 }],
      newEnis: [],
      plannedAddresses: 5,
      shortfall: 0,
    });
  });

  it('spills onto a new ENI in the next free slot when the existing ones are full', () => {
    const plan = planTopUp({
      needed: 12,
      limits: m5large,
      prefixDelegation: false,
      availabilityZone: 'eu-west-1a',
      enis: [{ eniId: 'eni-a', deviceIndex: 1, subnetId: 'subnet-1', slotsUsed: 6 }],
      interfaces: [
        { deviceIndex: 0, networkCardIndex: 0 },
        { deviceIndex: 1, networkCardIndex: 0 },
      ],
      subnets,
    });
    expect(plan.assign).toEqual([{ eniId: 'eni-a', ipCount: 3, prefixCount: 0 }]);
    expect(plan.newEnis).toEqual([
      { deviceIndex: 2, networkCardIndex: 0, subnetId: 'subnet-1', ipCount: 9, prefixCount: 0, ipv6PrefixCount: 0 },
    ]);
    expect(plan.plannedAddresses).toBe(12);
    expect(plan.shortfall).toBe(0);
  });

  it('reports a shortfall at the instance limits', () => {
    const plan = planTopUp({
      needed: 30,
      limits: m5large,
      prefixDelegation: false,
      availabilityZone: 'eu-west-1a',
      enis: [
        { eniId: 'eni-a', deviceIndex: 1, subnetId: 'subnet-1', slotsUsed: 9 },
        { eniId: 'eni-b', deviceIndex: 2, subnetId: 'subnet-1', slotsUsed: 7 },
      ],
      interfaces: [0, 1, 2].map((deviceIndex) => ({ deviceIndex, networkCardIndex: 0 })),
      subnets,
    });
    expect(plan.assign).toEqual([{ eniId: 'eni-b', ipCount: 2, prefixCount: 0 }]);
    expect(plan.newEnis).toEqual([]);
    expect(plan.shortfall).toBe(28);
  });

  it('asks for whole prefixes in prefix mode', () => {
    const plan = planTopUp({
      needed: 20,
      limits: m5large,
      prefixDelegation: true,
      availabilityZone: 'eu-west-1a',
      enis: [{ eniId: 'eni-a', deviceIndex: 1, subnetId: 'subnet-1', slotsUsed: 1 }],
      interfaces: [
        { deviceIndex: 0, networkCardIndex: 0 },
        { deviceIndex: 1, networkCardIndex: 0 },
      ],
      subnets,
    });
    expect(plan.assign).toEqual([{ eniId: 'eni-a', ipCount: 0, prefixCount: 2 }]);
    expect(plan.plannedAddresses).toBe(32);
  });

  it('stops at what the subnet still has', () => {
    const plan = planTopUp({
      needed: 8,
      limits: m5large,
      prefixDelegation: false,
      availabilityZone: 'eu-west-1a',
      enis: [{ eniId: 'eni-a', deviceIndex: 1, subnetId: 'subnet-1', slotsUsed: 0 }],
      interfaces: [
        { deviceIndex: 0, networkCardIndex: 0 },
        { deviceIndex: 1, networkCardIndex: 0 },
      ],
      subnets: [{ ...subnets[0]!, availableIpCount: 3 }],
    });
    expect(plan.assign).toEqual([{ eniId: 'eni-a', ipCount: 3, prefixCount: 0 }]);
    expect(plan.newEnis).toEqual([]);
    expect(plan.shortfall).toBe(5);
  });
});

describe('planTopUp around subnets EC2 refused (issue 25)', () => {
  const base = {
    limits: m5large,
    prefixDelegation: true,
    availabilityZone: 'eu-west-1a',
    enis: [{ eniId: 'eni-a', deviceIndex: 1, subnetId: 'subnet-1', slotsUsed: 1 }],
    interfaces: [0, 1].map((deviceIndex) => ({ deviceIndex, networkCardIndex: 0 })),
    subnets,
  };
  const closed = { prefixes: new Set(['subnet-1']), addresses: new Set<string>() };

  it('plans nothing on a subnet closed to /28s without the fallback', () => {
    expect(planTopUp({ ...base, needed: 4, closed })).toMatchObject({ assign: [], newEnis: [], shortfall: 4 });
  });

  it('with the fallback, plans single addresses on an ENI whose subnet is closed to /28s only', () => {
    const plan = planTopUp({ ...base, needed: 4, closed, addressFallback: true });
    expect(plan).toEqual({
      assign: [{ eniId: 'eni-a', ipCount: 4, prefixCount: 0 }],
      newEnis: [],
      plannedAddresses: 4,
      shortfall: 0,
    });
  });

  it('plans nothing of either kind on a subnet closed to addresses', () => {
    const both = { prefixes: new Set(['subnet-1']), addresses: new Set(['subnet-1']) };
    expect(planTopUp({ ...base, needed: 4, closed: both, addressFallback: true }).shortfall).toBe(4);
  });
});

describe('Function: poolEniClientToken', () => {
  const request = { deviceIndex: 2, subnetId: 'subnet-1', ipCount: 9, prefixCount: 0 };

  it('is the launch token salted with the planning time: stable per plan, new per plan', () => {
    const token = poolEniClientToken('i-0123456789abcdef0', request, 1_000);
    expect(poolEniClientToken('i-0123456789abcdef0', request, 1_000)).toBe(token);
    expect(poolEniClientToken('i-0123456789abcdef0', request, 2_000)).not.toBe(token);
    expect(eniClientToken('i-0123456789abcdef0', 2, request, 1_000)).toBe(token);
    // The unsalted launch token for the same device index differs: a reused index never replays an old ENI.
    expect(eniClientToken('i-0123456789abcdef0', 2, request)).not.toBe(token);
    expect(token.length).toBeLessThanOrEqual(64);
  });
});
