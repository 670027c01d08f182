import { afterEach, describe, expect, it } from 'vitest';
import type { LeaseStore } from '../../shared/lease-store/port.js';
import { sweepPools } from '../../shared/pool/sweep.js';
import { DynamoSweepCursorStore, type SweepCursorStore } from '../../shared/schedule/cursor.js';
import { claimOne, type PoolEnv, readyNode, startPoolEnv } from './support.js';

const HOUR_MS = 3_600_000;

/** The store with its node-index reads counted, and optionally costing clock time (a slow table). */
function timedStore(env: PoolEnv, msPerPage: number): { store: LeaseStore; pages: () => number; counts: () => number } {
  let pages = 0;
  let counts = 0;
  const store = new Proxy(env.store, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (prop === 'listNodeRefs')
        return async (...args: Parameters<LeaseStore['listNodeRefs']>) => {
          pages += 1;
          env.clock.advance(msPerPage);
          return target.listNodeRefs(...args);
        };
      if (prop === 'countClaimable')
        return async (...args: Parameters<LeaseStore['countClaimable']>) => {
          counts += 1;
          return target.countClaimable(...args);
        };
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { store, pages: () => pages, counts: () => counts };
}

describe('Function: sweepPools (paced, issue 25)', () => {
  let env: PoolEnv | undefined;
  afterEach(async () => {
    await env?.close();
    env = undefined;
  });

  it('visits each READY node once per cycle, idles between cycles, and passes in full only nodes out of band', async () => {
    env = await startPoolEnv();
    const nodes = [await readyNode(env), await readyNode(env), await readyNode(env)];
    const cursor = new DynamoSweepCursorStore(env.api, env.tableName);
    const t = timedStore(env, 0);
    const deps = env.deps({ store: t.store, sweepCursor: cursor });

    // Cycle 0 counts every node like any other: all three are in band. (A full pass is for the nodes the
    // reconciler's census lists as due: test/reconcile/census.test.ts.)
    const first = await sweepPools(deps);
    expect(first).toMatchObject({ nodes: 3, cycle: 0, cycleDone: true, stoppedEarly: false, skippedInBand: 3 });
    expect(first.reports).toHaveLength(0);

    // A minute later: the cycle is done and the next one is an hour away; nothing but the cursor is read.
    env.clock.advance(60_000);
    const pagesBefore = t.pages();
    const idle = await sweepPools(deps);
    expect(idle).toMatchObject({ nodes: 0, reports: [], cycleDone: true });
    expect(t.pages()).toBe(pagesBefore);

    // An hour on, one node was drained by pods whose stream passes were lost: only it gets a full pass.
    for (let i = 0; i < 4; i++) await claimOne(env, nodes[1]!.instanceArn);
    env.clock.advance(HOUR_MS);
    const countsBefore = t.counts();
    const second = await sweepPools(deps);
    expect(second).toMatchObject({ nodes: 3, cycle: 1, cycleDone: true, skippedInBand: 2 });
    expect(t.counts() - countsBefore).toBe(3);
    expect(second.reports.map((r) => r.instanceArn)).toEqual([nodes[1]!.instanceArn]);
    expect(second.reports[0]!.leased.length).toBeGreaterThan(0);
  });

  it('between cycles a run reads its cursor once, eventually consistent; a run that starts a cycle reads it again', async () => {
    env = await startPoolEnv();
    await readyNode(env);
    const reads = { eventual: 0, consistent: 0 };
    const real = new DynamoSweepCursorStore(env.api, env.tableName);
    const cursor: SweepCursorStore = {
      load: (name, read) => {
        reads[read?.eventual === true ? 'eventual' : 'consistent'] += 1;
        return real.load(name, read);
      },
      save: (name, state, version) => real.save(name, state, version),
    };
    const deps = env.deps({ sweepCursor: cursor });
    await sweepPools(deps);
    const cycleStart = { ...reads };
    for (let i = 0; i < 3; i++) {
      env.clock.advance(60_000);
      expect((await sweepPools(deps)).nodes).toBe(0);
    }
    expect(reads).toEqual({ eventual: cycleStart.eventual + 3, consistent: cycleStart.consistent });
    env.clock.advance(HOUR_MS);
    expect((await sweepPools(deps)).nodes).toBe(1);
    expect(reads.consistent).toBeGreaterThan(cycleStart.consistent);
  });

  it('stops at its deadline and the next run carries on where it stopped, each node visited once', async () => {
    env = await startPoolEnv();
    const arns = new Set<string>();
    for (let i = 0; i < 4; i++) arns.add((await readyNode(env)).instanceArn);
    const cursor = new DynamoSweepCursorStore(env.api, env.tableName);
    // Every page of the node index costs 10 s of clock time; a run may start pages for 15 s.
    const t = timedStore(env, 10_000);
    // A full pass every cycle, so each visit leaves a report to count.
    const deps = env.deps({ store: t.store, sweepCursor: cursor, fullPassEveryCycles: 1 });
    const visited: string[] = [];
    let runs = 0;
    for (;;) {
      runs += 1;
      const report = await sweepPools(deps, { pageSize: 1, deadlineMs: env.clock.nowMs() + 15_000 });
      visited.push(...report.reports.map((r) => r.instanceArn));
      if (report.cycleDone) break;
      expect(report.stoppedEarly).toBe(true);
      if (runs > 10) throw new Error('the sweep never finishes its cycle');
    }
    // 16 shards, one node ref per page and two pages per run: more than one run, and no node twice.
    expect(runs).toBeGreaterThan(1);
    expect(visited.sort()).toEqual([...arns].sort());
  });

  it('without a deadline (negative control) one run does the whole cycle', async () => {
    env = await startPoolEnv();
    for (let i = 0; i < 2; i++) await readyNode(env);
    const cursor = new DynamoSweepCursorStore(env.api, env.tableName);
    const t = timedStore(env, 10_000);
    const report = await sweepPools(env.deps({ store: t.store, sweepCursor: cursor, fullPassEveryCycles: 1 }), {
      pageSize: 1,
    });
    expect(report).toMatchObject({ cycleDone: true, stoppedEarly: false });
    expect(report.reports).toHaveLength(2);
  });
});
