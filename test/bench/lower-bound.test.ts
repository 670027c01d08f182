import { describe, expect, it } from 'vitest';
import { adoptionLowerBound, tokenBucketLowerBound } from './lower-bound.js';

const AWS = {
  create: { bucket: 100, refillPerSecond: 5 },
  attach: { bucket: 50, refillPerSecond: 5 },
  modify: { bucket: 100, refillPerSecond: 5 },
};
const LATENCY = { create: 280, attach: 350, modify: 140 };

describe('Function: tokenBucketLowerBound', () => {
  it('is the single chain when every call fits in the buckets', () => {
    const b = tokenBucketLowerBound({ podEnis: 10, buckets: AWS, minLatencyMs: LATENCY, attachMs: 3000 });
    expect(b.lowerBoundMs).toBe(280 + 350 + 3000);
    expect(b.drainMs).toEqual({ create: 0, attach: 0, modify: 0 });
  });

  it('is set by the attach bucket, the smallest, once hundreds of ENIs are needed', () => {
    // 400 attaches: 50 from the bucket, 350 more at 5/s = 70 s, then the last attachment completes.
    const b = tokenBucketLowerBound({ podEnis: 400, buckets: AWS, minLatencyMs: LATENCY, attachMs: 3000 });
    expect(b.bindingAction).toBe('attach');
    expect(b.lowerBoundMs).toBe(70_000 + 350 + 3000);
  });

  it('follows a smaller bucket wherever it is', () => {
    const slowModify = { ...AWS, modify: { bucket: 10, refillPerSecond: 1 } };
    const b = tokenBucketLowerBound({ podEnis: 100, buckets: slowModify, minLatencyMs: LATENCY, attachMs: 3000 });
    expect(b.bindingAction).toBe('modify');
    expect(b.lowerBoundMs).toBe(90_000 + 140);
  });
});

describe('Function: adoptionLowerBound', () => {
  const base = {
    nodesPerDescribe: 1,
    describeChain: ['DescribeInstances', 'DescribeNetworkInterfaces'],
    describeBucket: { bucket: 100, refillPerSecond: 20 },
    minDescribeLatencyMs: 140,
    writeUnits: 0,
    readUnits: 0,
    writeUnitsPerSecond: 4000,
    readUnitsPerSecond: 12000,
  };

  it('is set by the first Describe of the chain at 1,000 nodes: (1000 − 100)/20 s, then both latencies', () => {
    const b = adoptionLowerBound({ ...base, nodes: 1000, writeUnits: 20_000 });
    expect(b.boundSetBy).toBe('DescribeInstances');
    expect(b.lowerBoundMs).toBe(45_000 + 2 * 140);
    expect(b.endsMs['dynamodb-writes']).toBe(5000);
  });

  it('counts one Describe of each action per batch: 1,000 nodes in batches of 10 fit the bucket', () => {
    const b = adoptionLowerBound({ ...base, nodes: 1000, nodesPerDescribe: 10, writeUnits: 20_000 });
    expect(b.endsMs['DescribeInstances']).toBe(2 * 140);
    expect(b.boundSetBy).toBe('dynamodb-writes');
    expect(b.lowerBoundMs).toBe(5000);
    // 5,000 nodes: 500 calls, 400 past the bucket at 20/s.
    expect(adoptionLowerBound({ ...base, nodes: 5000, nodesPerDescribe: 10 }).endsMs['DescribeInstances']).toBe(
      20_000 + 2 * 140,
    );
  });

  it('is set by the table when the writes outweigh the Describe buckets', () => {
    const b = adoptionLowerBound({ ...base, nodes: 50, writeUnits: 400_000 });
    expect(b.boundSetBy).toBe('dynamodb-writes');
    expect(b.lowerBoundMs).toBe(100_000);
  });
});
