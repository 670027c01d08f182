import { describe, expect, it } from 'vitest';
import { instanceArn } from '../../shared/domain/arn.js';
import { PARTITION_READ_MAX_BYTES } from '../../shared/lease-store/partition-bound.js';
import { expectedLeases } from '../../shared/lifecycle/pod-eni.js';
import { METRIC_NAMES } from '../../shared/metrics.js';
import { sweepPools } from '../../shared/pool/sweep.js';
import { DynamoLeasePartitions, type LeasePartitions } from '../../shared/reconcile/lease-partitions.js';
import { type PacedReconcileDeps, reconcilePaced } from '../../shared/reconcile/paced.js';
import { DynamoSweepCursorStore } from '../../shared/schedule/cursor.js';
import { ACCOUNT, type PoolEnv, REGION, readyNode } from '../pool/support.js';
import { MARK_AGE_MS, pacedDeps, poolEnvPerTest } from './support/harness.js';

const startEnv = poolEnvPerTest();

const NEVER = Number.POSITIVE_INFINITY;
const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;
const WALK_CYCLE_MS = 900_000;

/**
 * The reconciler and the pool sweep as the Lambdas wire them: one cursor store in the schedules partition, so
 * the census's due list reaches the sweep.
 */
function schedules(e: PoolEnv, extra: Partial<PacedReconcileDeps> = {}) {
  const cursor = new DynamoSweepCursorStore(e.api, e.tableName);
  return { reconciler: pacedDeps(e, { cursor, ...extra }), pool: e.deps({ sweepCursor: cursor }) };
}

describe('Census: the daily Scan is the first look of the pool’s full pass', () => {
  it('an interrupted release on a node in band: the hourly count misses it, the census lists it, the sweep finishes it', async () => {
    const env = await startEnv();
    const node = await readyNode(env);
    const ip = node.node.enis[0]!.addresses[0]!;
    await env.store.markReleasing(node.instanceArn, ip, env.clock.nowMs());
    env.clock.advance(121_000); // past resumeReleasingAfterMs: the handshake's invocation is surely gone
    const { reconciler, pool } = schedules(env);

    // Control: five claimable leases are in band, so the hourly count passes the node by.
    const counted = await sweepPools(pool);
    expect([counted.skippedInBand, counted.reports.length]).toEqual([1, 0]);
    expect((await env.store.listLeases(node.instanceArn)).find((l) => l.ip === ip)?.state).toBe('RELEASING');

    expect((await reconcilePaced(reconciler, NEVER)).poolDue).toEqual([node.instanceArn]);
    env.clock.advance(HOUR_MS);
    const swept = await sweepPools(pool);
    expect(swept.due).toBe(1);
    expect(swept.reports.map((r) => [r.instanceArn, r.resumed])).toEqual([[node.instanceArn, 1]]);
    expect((await env.store.listLeases(node.instanceArn)).map((l) => l.ip)).not.toContain(ip);
    // Passed, it leaves the list: the next cycle passes nobody in full.
    env.clock.advance(HOUR_MS);
    expect(await sweepPools(pool)).toMatchObject({ due: 0, reports: [] });
  });

  it('a recorded address without a lease is leased again within a day and an hour', async () => {
    const env = await startEnv();
    const node = await readyNode(env);
    const ip = node.node.enis[0]!.addresses[2]!;
    await env.api.deleteItem({ TableName: env.tableName, Key: { pk: { S: node.instanceArn }, sk: { S: `ip#${ip}` } } });
    const { reconciler, pool } = schedules(env);
    expect((await sweepPools(pool)).reports).toEqual([]);

    expect((await reconcilePaced(reconciler, NEVER)).poolDue).toEqual([node.instanceArn]);
    env.clock.advance(HOUR_MS);
    expect((await sweepPools(pool)).reports.map((r) => r.adopted)).toEqual([1]);
    expect((await env.store.listLeases(node.instanceArn)).map((l) => l.ip)).toContain(ip);
  });

  it('a clean cluster lists nobody, and the census Scans again only after a day', async () => {
    const env = await startEnv();
    await readyNode(env);
    await readyNode(env);
    const { reconciler } = schedules(env);
    const first = await reconcilePaced(reconciler, NEVER);
    expect([first.poolDue, first.drift, first.strays.scanPages > 0]).toEqual([[], [], true]);
    env.clock.advance(DAY_MS - 1);
    expect((await reconcilePaced(reconciler, NEVER)).strays.scanPages).toBe(0);
    env.clock.advance(1);
    expect((await reconcilePaced(reconciler, NEVER)).strays.scanPages).toBeGreaterThan(0);
  });
});

describe('Census: drift the digests cannot see', () => {
  it('a lease item put by hand (node item and EC2 untouched) is reported within a day, then every walk cycle', async () => {
    const env = await startEnv();
    const node = await readyNode(env);
    const { reconciler } = schedules(env);
    expect((await reconcilePaced(reconciler, NEVER)).drift).toEqual([]);

    const [template] = expectedLeases(node.node, 1);
    const bogus = '10.0.15.250'; // in the subnet, on no ENI
    await env.store.putLeases([{ ...template!, ip: bogus }], env.clock.nowMs());
    // The walk reads only nodes whose digest (node-item version, EC2's view) changed: this one's did not.
    env.clock.advance(WALK_CYCLE_MS);
    const walked = await reconcilePaced(reconciler, NEVER);
    expect([walked.nodesChecked, walked.drift]).toEqual([0, []]);

    env.clock.advance(DAY_MS - WALK_CYCLE_MS);
    const census = await reconcilePaced(reconciler, NEVER);
    const expected = { kind: 'lease-without-address', instanceId: node.instanceId, address: bogus };
    expect(census.drift).toEqual([expect.objectContaining(expected)]);
    // The census dropped its digest: the walk reads it again each cycle until someone fixes it.
    env.clock.advance(WALK_CYCLE_MS);
    expect((await reconcilePaced(reconciler, NEVER)).drift).toEqual([expect.objectContaining(expected)]);
  });
});

describe('Census: whole partitions across Scan pages and runs', () => {
  /** Pages of `items` items; each page costs `msPerPage` of the manual clock. */
  function paged(e: PoolEnv, msPerPage: number) {
    const real = new DynamoLeasePartitions(e.api, e.tableName);
    let pages = 0;
    const partitions: LeasePartitions = new Proxy(real, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver) as unknown;
        if (prop === 'scanPage')
          return async (...args: Parameters<LeasePartitions['scanPage']>) => {
            pages += 1;
            e.clock.advance(msPerPage);
            return target.scanPage(...args);
          };
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    return { partitions, pages: () => pages };
  }

  it('pages smaller than a partition: each partition is judged whole, nothing is taken for stray or due', async () => {
    const env = await startEnv();
    const nodes = [await readyNode(env), await readyNode(env)];
    const [template] = expectedLeases(nodes[0]!.node, 1);
    const strayArn = instanceArn(REGION, ACCOUNT, 'i-0000000000000beef', 'aws');
    const strayIps = ['10.0.14.1', '10.0.14.2', '10.0.14.3', '10.0.14.4', '10.0.14.5'];
    await env.store.putLeases(
      strayIps.map((ip) => ({ ...template!, instanceArn: strayArn, ip })),
      env.clock.nowMs(),
    );
    const p = paged(env, 0);
    // Three items a page: every node's seven items (six leases, the node item) span three pages.
    const { reconciler } = schedules(env, { leasePartitions: p.partitions, censusPageItems: 3 });
    const run = await reconcilePaced(reconciler, NEVER);
    expect(p.pages()).toBeGreaterThan(6);
    expect(run.poolDue).toEqual([]);
    expect(run.drift).toEqual([]);
    expect(run.strayLeases.map((s) => [s.instanceArn, s.action])).toEqual([[strayArn, 'mark']]);
  });

  it('one page a run: a run that stops inside a partition leaves it whole to the next run', async () => {
    const env = await startEnv();
    for (let i = 0; i < 3; i++) await readyNode(env);
    const p = paged(env, 10);
    const { reconciler } = schedules(env, { leasePartitions: p.partitions, censusPageItems: 4 });
    const due: string[] = [];
    let runs = 0;
    for (let scanning = true; scanning; runs++) {
      if (runs > 40) throw new Error('the census never finishes');
      const run = await reconcilePaced(reconciler, env.clock.nowMs() + 5);
      due.push(...run.poolDue);
      scanning = run.strays.scanning;
    }
    expect(runs).toBeGreaterThan(3);
    expect(due).toEqual([]);
  });
});

describe('Census: a partition past the read bound', () => {
  /**
   * The census's Scan as it sees a flooded partition, without writing the 16 MB (test/security/partition-flood
   * does that): `flooded` partitions come back past the bound, with none of their items read — a flood's
   * lease-keyed items sort before the node item. Records which partitions the second look read.
   */
  function flooding(e: PoolEnv, flooded: ReadonlySet<string>) {
    const real = new DynamoLeasePartitions(e.api, e.tableName);
    const secondLooks: string[] = [];
    const partitions: LeasePartitions = new Proxy(real, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver) as unknown;
        if (prop === 'scanPage')
          return async (...args: Parameters<LeasePartitions['scanPage']>) => {
            const page = await target.scanPage(...args);
            const unread = (p: (typeof page.partitions)[number]) => ({
              instanceArn: p.instanceArn,
              leases: [],
              illFormedLeases: 0,
              lastKey: p.lastKey,
              bytes: PARTITION_READ_MAX_BYTES + 1,
            });
            return { ...page, partitions: page.partitions.map((p) => (flooded.has(p.instanceArn) ? unread(p) : p)) };
          };
        if (prop === 'hasLeaseItems')
          return async (arn: string) => {
            secondLooks.push(arn);
            return target.hasLeaseItems(arn);
          };
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    return { partitions, secondLooks };
  }

  it('a live node’s flood is reported as oversized and counted, not judged as a possible stray', async () => {
    const env = await startEnv();
    const flooder = await readyNode(env);
    const other = await readyNode(env);
    const f = flooding(env, new Set([flooder.instanceArn]));
    const { reconciler } = schedules(env, { leasePartitions: f.partitions });

    const run = await reconcilePaced(reconciler, NEVER);

    expect(run.strays.oversized).toEqual([flooder.instanceArn]);
    expect(run.strays.judged).toBe(0);
    expect(f.secondLooks).toEqual([]);
    expect(run.strayLeases).toEqual([]);
    expect(env.metrics.total(METRIC_NAMES.reconcilerOversizedPartitions)).toBe(1);
    expect(env.logs.some((l) => l.includes(flooder.instanceArn) && l.includes('left unread'))).toBe(true);
    expect(env.logs.some((l) => l.includes(other.instanceArn) && l.includes('left unread'))).toBe(false);
  });

  it('an oversized partition with no node item on a gone instance keeps both looks: marked, then removed', async () => {
    const env = await startEnv();
    const node = await readyNode(env);
    const [template] = expectedLeases(node.node, 1);
    const strayArn = instanceArn(REGION, ACCOUNT, 'i-0000000000000f100', 'aws');
    await env.store.putLeases([{ ...template!, instanceArn: strayArn, ip: '10.0.14.9' }], env.clock.nowMs());
    const f = flooding(env, new Set([strayArn]));
    const { reconciler } = schedules(env, { leasePartitions: f.partitions });

    const first = await reconcilePaced(reconciler, NEVER);
    expect(first.strays.oversized).toEqual([strayArn]);
    expect(first.strayLeases.map((s) => [s.instanceArn, s.action])).toEqual([[strayArn, 'mark']]);
    expect(await env.store.listLeases(strayArn)).toHaveLength(1);

    env.clock.advance(MARK_AGE_MS);
    const second = await reconcilePaced(reconciler, NEVER);
    expect(second.strayLeases.map((s) => [s.instanceArn, s.action])).toEqual([[strayArn, 'remove']]);
    expect(await env.store.listLeases(strayArn)).toEqual([]);
  });
});
