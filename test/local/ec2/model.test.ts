import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeRequest } from '../../../local-cloud/ec2/codec.js';
import { DEFAULT_LATENCY_MS, LatencyModel } from '../../../local-cloud/ec2/latency.js';
import { SeededRandom } from '../../../local-cloud/ec2/random.js';
import { SubnetPool } from '../../../local-cloud/ec2/subnet-pool.js';
import { DESCRIBE_ENIS_UNPAGINATED, TokenBuckets } from '../../../local-cloud/ec2/throttle.js';
import { Timeline } from '../../../local-cloud/ec2/timeline.js';
import { loadThrottling } from '../../../shared/data/catalog.js';
import { addressesOf } from '../../../shared/ipv4.js';

function manualTimeline(timeScale: number): { timeline: Timeline; advance: (ms: number) => void } {
  let nowMs = 1_000_000;
  return { timeline: new Timeline(timeScale, () => nowMs), advance: (ms) => (nowMs += ms) };
}

function drain(buckets: TokenBuckets, key: string, max = 1000): number {
  let taken = 0;
  while (taken < max) {
    try {
      buckets.take(key);
      taken += 1;
    } catch {
      return taken;
    }
  }
  return taken;
}

describe('TokenBuckets', () => {
  it('holds the figures of the EC2 guide and refills at the rate scaled by timeScale', () => {
    const { timeline, advance } = manualTimeline(0.01);
    const buckets = new TokenBuckets(loadThrottling(), timeline, true);
    // CreateNetworkInterface: bucket 100, refill 5/s.
    expect(drain(buckets, 'CreateNetworkInterface')).toBe(100);
    // 5 tokens per AWS second = 5 per 10 real ms at timeScale 0.01.
    advance(10);
    expect(drain(buckets, 'CreateNetworkInterface')).toBe(5);
    advance(1_000_000);
    expect(drain(buckets, 'CreateNetworkInterface')).toBe(100);
    // Attach has the smaller bucket; unlisted mutating actions the "other" row.
    expect(drain(buckets, 'AttachNetworkInterface')).toBe(50);
    expect(drain(buckets, 'RunInstances')).toBe(50);
    expect(drain(buckets, 'DescribeSubnets')).toBe(100);
  });

  it('uses the smaller DescribeNetworkInterfaces bucket for unfiltered or unpaginated calls', () => {
    const { timeline } = manualTimeline(1);
    const buckets = new TokenBuckets(loadThrottling(), timeline, true);
    expect(buckets.keyFor('DescribeNetworkInterfaces', {})).toBe(DESCRIBE_ENIS_UNPAGINATED);
    expect(buckets.keyFor('DescribeNetworkInterfaces', { Filters: [] })).toBe(DESCRIBE_ENIS_UNPAGINATED);
    expect(buckets.keyFor('DescribeNetworkInterfaces', { MaxResults: 5 })).toBe(DESCRIBE_ENIS_UNPAGINATED);
    expect(buckets.keyFor('DescribeNetworkInterfaces', { Filters: [], MaxResults: 5 })).toBe(
      'DescribeNetworkInterfaces',
    );
    expect(drain(buckets, DESCRIBE_ENIS_UNPAGINATED)).toBe(50);
    expect(drain(buckets, 'DescribeNetworkInterfaces')).toBe(100);
  });

  it('never throttles when disabled or when time runs at scale 0', () => {
    const off = new TokenBuckets(loadThrottling(), manualTimeline(1).timeline, false);
    expect(drain(off, 'AttachNetworkInterface', 500)).toBe(500);
    const instant = new TokenBuckets(loadThrottling(), manualTimeline(0).timeline, true);
    expect(drain(instant, 'AttachNetworkInterface', 500)).toBe(500);
  });
});

describe('SubnetPool', () => {
  type Op = { kind: 'any'; count: number } | { kind: 'prefix'; count: number } | { kind: 'release'; pick: number };

  it('keeps available + held = size - 5 and never hands out an address twice, whatever the sequence', () => {
    const op: fc.Arbitrary<Op> = fc.oneof(
      fc.record({ kind: fc.constant('any' as const), count: fc.integer({ min: 1, max: 20 }) }),
      fc.record({ kind: fc.constant('prefix' as const), count: fc.integer({ min: 1, max: 3 }) }),
      fc.record({ kind: fc.constant('release' as const), pick: fc.nat() }),
    );
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 2 ** 31 }), fc.array(op, { maxLength: 60 }), (seed, ops) => {
        const pool = new SubnetPool('10.0.0.0/24', new SeededRandom(seed));
        const held: { addresses: string[]; prefix?: string }[] = [];
        for (const o of ops) {
          const before = pool.available();
          try {
            if (o.kind === 'any') held.push({ addresses: pool.claimAny(o.count) });
            else if (o.kind === 'prefix') {
              for (const p of pool.claimPrefixes(o.count)) held.push({ addresses: addressesOf(p), prefix: p });
            } else if (held.length) {
              const [h] = held.splice(o.pick % held.length, 1);
              if (h?.prefix) pool.releasePrefix(h.prefix);
              else for (const a of h?.addresses ?? []) pool.release(a);
            }
          } catch (err) {
            // Short of addresses: the subnet is full; addresses enough but no aligned /28 left: fragmented.
            const code = (err as { code?: string }).code;
            const enough = o.kind === 'prefix' && before >= o.count * 16;
            expect(code).toBe(enough ? 'InsufficientCidrBlocks' : 'InsufficientFreeAddressesInSubnet');
            if (o.kind === 'prefix') expect(pool.freeBlocks().length).toBeLessThan(o.count);
            expect(pool.available()).toBe(before);
          }
          const all = held.flatMap((x) => x.addresses);
          expect(new Set(all).size).toBe(all.length);
          expect(pool.available() + all.length).toBe(256 - 5);
          for (const a of all) expect(['10.0.0.0', '10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.255']).not.toContain(a);
        }
      }),
      { numRuns: 150 },
    );
  });
});

describe('Query codec', () => {
  it('decodes flattened EC2 lists and nested structures into the SDK input shape', () => {
    const params = new URLSearchParams(
      'Action=DescribeNetworkInterfaces&Version=2016-11-15&Filter.1.Name=tag%3Aowner&Filter.1.Value.1=a&Filter.1.Value.2=b' +
        '&Filter.2.Name=subnet-id&Filter.2.Value.1=subnet-1&NetworkInterfaceId.1=eni-1&MaxResults=10&DryRun=false',
    );
    expect(decodeRequest('DescribeNetworkInterfaces', params)).toEqual({
      Filters: [
        { Name: 'tag:owner', Values: ['a', 'b'] },
        { Name: 'subnet-id', Values: ['subnet-1'] },
      ],
      NetworkInterfaceIds: ['eni-1'],
      MaxResults: 10,
      DryRun: false,
    });
    const create = new URLSearchParams(
      'Action=CreateNetworkInterface&SubnetId=subnet-1&SecurityGroupId.1=sg-1&PrivateIpAddresses.1.PrivateIpAddress=10.0.0.9' +
        '&PrivateIpAddresses.1.Primary=true&TagSpecification.1.ResourceType=network-interface&TagSpecification.1.Tag.1.Key=k' +
        '&TagSpecification.1.Tag.1.Value=v&Ipv4PrefixCount=2',
    );
    expect(decodeRequest('CreateNetworkInterface', create)).toEqual({
      SubnetId: 'subnet-1',
      Groups: ['sg-1'],
      PrivateIpAddresses: [{ PrivateIpAddress: '10.0.0.9', Primary: true }],
      TagSpecifications: [{ ResourceType: 'network-interface', Tags: [{ Key: 'k', Value: 'v' }] }],
      Ipv4PrefixCount: 2,
    });
  });
});

describe('LatencyModel', () => {
  it('draws AWS-like figures with ±30 % jitter, repeatably under a seed, and nothing when off', () => {
    const a = new LatencyModel(new SeededRandom(9), true);
    const b = new LatencyModel(new SeededRandom(9), true);
    const draws = Array.from({ length: 50 }, () => a.simMs('CreateNetworkInterface'));
    expect(Array.from({ length: 50 }, () => b.simMs('CreateNetworkInterface'))).toEqual(draws);
    const base = DEFAULT_LATENCY_MS['CreateNetworkInterface'] as number;
    for (const ms of draws) {
      expect(ms).toBeGreaterThanOrEqual(base * 0.7);
      expect(ms).toBeLessThan(base * 1.3);
    }
    expect(new Set(draws).size).toBeGreaterThan(40);
    // Describe actions without their own figure use the Describe* one.
    const describe = a.simMs('DescribeVpcs');
    expect(describe).toBeGreaterThanOrEqual((DEFAULT_LATENCY_MS['Describe*'] as number) * 0.7);
    expect(describe).toBeLessThan((DEFAULT_LATENCY_MS['Describe*'] as number) * 1.3);
    const off = new LatencyModel(new SeededRandom(9), false);
    expect(off.simMs('CreateNetworkInterface')).toBe(0);
    off.setExtra('*', 7);
    off.setExtra('DescribeVpcs', 5);
    expect(off.extraMs('DescribeVpcs')).toBe(12);
    expect(off.extraMs('CreateTags')).toBe(7);
  });
});
