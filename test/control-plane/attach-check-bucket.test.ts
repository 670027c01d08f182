import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Ec2Call } from '../../local-cloud/ec2/simulator.js';
import { TokenBuckets } from '../../local-cloud/ec2/throttle.js';
import { Timeline } from '../../local-cloud/ec2/timeline.js';
import { loadThrottling } from '../../shared/data/catalog.js';
import { DESCRIBE_ENIS_UNPAGINATED, describeEnisBucketKey } from '../../shared/ec2/budgeted-ec2.js';
import type { EniQuery } from '../../shared/ec2/port.js';
import { launchEventBody } from './support/events.js';
import { Harness } from './support/harness.js';

/**
 * After each Attach the launch looks at its ENIs until EC2 shows them attached. By id list that look can never
 * be paginated, so EC2 meters it against DescribeNetworkInterfaces' small "unfiltered or unpaginated" bucket
 * (50 tokens at 10/s), which no account raise of Attach touches: at 1,000 nodes the looks alone took longer
 * than the doubled-Attach bound. The look goes through the `network-interface-id` filter, paginated.
 */
describe('The attachment check draws on the standard DescribeNetworkInterfaces bucket', () => {
  let h: Harness;
  const calls: Ec2Call[] = [];
  // The simulator's own bucket keying, to check the budget names the bucket EC2 really meters.
  const buckets = new TokenBuckets(loadThrottling(), new Timeline(1), false);

  beforeAll(async () => {
    // 1 real ms = 1 AWS s: every other bucket refills at once, the emptied one below does not within the test.
    h = await Harness.start({
      config: { minLeases: 4 },
      ec2: { timeScale: 0.001, throttling: true },
      // A refused call fails at once instead of after the SDK's back-off.
      ec2Client: { maxAttempts: 1 },
    });
    h.sim.api.onCall((call) => calls.push(call));
  });
  afterAll(() => h.close());

  /** The unpaginated bucket emptied (its one token spent) and without refill in the test's time. */
  const starveUnpaginated = async (): Promise<void> => {
    h.sim.admin.setBucket(DESCRIBE_ENIS_UNPAGINATED, { bucket: 1, refillPerSecond: 1e-9 });
    await h.ec2.describeNetworkInterfaces({});
  };
  const throttledDescribes = (): number => h.sim.admin.counts()['DescribeNetworkInterfaces']?.throttled ?? 0;

  it('filters by id: unknown ids are absent, an empty list makes no call, and the budget names the bucket EC2 uses', async () => {
    const make = (token: string) =>
      h.ec2.createNetworkInterface({
        subnetId: h.subnetId,
        securityGroupIds: [],
        ipCount: 0,
        prefixCount: 0,
        tags: { owner: 'bucket-test' },
        clientToken: token,
      });
    const [a, b] = [await make('bucket-a'), await make('bucket-b')];
    const from = calls.length;
    const seen = await h.ec2.describeNetworkInterfaces({ filterEniIds: [a.eniId, 'eni-0000000000000dead', b.eniId] });
    expect(seen.map((e) => e.eniId).sort()).toEqual([a.eniId, b.eniId].sort());
    expect(await h.ec2.describeNetworkInterfaces({ filterEniIds: [] })).toEqual([]);
    expect(calls.length - from).toBe(1);

    // The budget's key for each query form is the key the simulator derives from what the adapter sent.
    const forms: EniQuery[] = [
      { filterEniIds: [a.eniId] },
      { eniIds: [a.eniId] },
      { attachedTo: 'i-0000000000000dead' },
      { attachedToAny: ['i-0000000000000dead', 'i-0000000000000beef'] },
      { tags: { owner: 'bucket-test' } },
      { subnetIds: [h.subnetId] },
      {},
    ];
    const keys = [];
    for (const query of forms) {
      const before = calls.length;
      await h.ec2.describeNetworkInterfaces(query);
      const sent = calls.slice(before).filter((c) => c.action === 'DescribeNetworkInterfaces');
      expect(sent).toHaveLength(1);
      const simulatorKey = buckets.keyFor('DescribeNetworkInterfaces', sent[0]!.input as Record<string, unknown>);
      expect(describeEnisBucketKey(query)).toBe(simulatorKey);
      keys.push(simulatorKey);
    }
    expect(keys).toEqual([
      'DescribeNetworkInterfaces',
      DESCRIBE_ENIS_UNPAGINATED,
      'DescribeNetworkInterfaces',
      'DescribeNetworkInterfaces',
      'DescribeNetworkInterfaces',
      'DescribeNetworkInterfaces',
      DESCRIBE_ENIS_UNPAGINATED,
    ]);

    // Control: with the small bucket emptied, the id list is refused and the filter is not.
    await starveUnpaginated();
    const throttledBefore = throttledDescribes();
    await expect(h.ec2.describeNetworkInterfaces({ eniIds: [a.eniId] })).rejects.toMatchObject({ kind: 'throttling' });
    expect(throttledDescribes()).toBeGreaterThan(throttledBefore);
    const afterControl = throttledDescribes();
    expect((await h.ec2.describeNetworkInterfaces({ filterEniIds: [a.eniId] })).map((e) => e.eniId)).toEqual([a.eniId]);
    expect(throttledDescribes()).toBe(afterControl);
  });

  it('lets launches complete with the unpaginated bucket empty, never drawing on it', async () => {
    await starveUnpaginated();
    const throttledBefore = throttledDescribes();
    const from = calls.length;
    const ids = [h.launchInstance('m5.large'), h.launchInstance('m5.large'), h.launchInstance('m5.large')];
    for (const id of ids) await h.drive(launchEventBody(id), { maxInvocations: 12 });

    for (const id of ids) expect(h.autoScaling.resultFor(id)).toEqual(['CONTINUE']);
    const looks = calls.slice(from).filter((c) => c.action === 'DescribeNetworkInterfaces');
    // Each launch looked at its attachments at least once, every look through the standard bucket.
    expect(looks.length).toBeGreaterThanOrEqual(ids.length);
    for (const look of looks)
      expect(buckets.keyFor(look.action, look.input as Record<string, unknown>)).toBe('DescribeNetworkInterfaces');
    expect(throttledDescribes()).toBe(throttledBefore);
    expect((await h.check()).violations).toEqual([]);
  });
});
