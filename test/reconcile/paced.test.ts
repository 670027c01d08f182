import { describe, expect, it } from 'vitest';
import { instanceArn } from '../../shared/domain/arn.js';
import type { LeaseStore } from '../../shared/lease-store/port.js';
import { nodeIndexShard } from '../../shared/lease-store/table.js';
import { expectedLeases } from '../../shared/lifecycle/pod-eni.js';
import { inSpan, reconcilePaced } from '../../shared/reconcile/paced.js';
import type { SweepCursorStore } from '../../shared/schedule/cursor.js';
import { ACCOUNT, REGION, readyNode } from '../pool/support.js';
import { MemorySweepCursorStore } from '../support/memory-sweep-cursor-store.js';
import { MARK_AGE_MS, pacedDeps, poolEnvPerTest } from './support/harness.js';

const startEnv = poolEnvPerTest();

const CYCLE_MS = 900_000;
const NEVER = Number.POSITIVE_INFINITY;

/** The store with its lease reads and index pages counted (what a schedule pays per node). */
function counted(store: LeaseStore, onPage?: () => void) {
  // `consistent…`: reads at full price (the rest asked for an eventually consistent first look).
  const counts = { listLeases: 0, getNode: 0, pages: 0, consistentListLeases: 0, consistentGetNode: 0 };
  const wrapped = new Proxy(store, {
    get(target, prop, receiver) {
      const fn = Reflect.get(target, prop, receiver) as unknown;
      if (typeof fn !== 'function') return fn;
      return (...args: unknown[]) => {
        const eventual = (args[1] as { eventual?: boolean } | undefined)?.eventual === true;
        if (prop === 'listLeases') counts.listLeases += 1;
        if (prop === 'getNode') counts.getNode += 1;
        if (prop === 'listLeases' && !eventual) counts.consistentListLeases += 1;
        if (prop === 'getNode' && !eventual) counts.consistentGetNode += 1;
        if (prop === 'listNodeRefs') {
          counts.pages += 1;
          onPage?.();
        }
        return (fn as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { store: wrapped, counts };
}

describe('Paced reconciler: reads follow change, not runs', () => {
  it('reads a node’s leases on the first cycle and again only when its digest changes', async () => {
    const env = await startEnv();
    const nodes = [await readyNode(env), await readyNode(env), await readyNode(env)];
    const { store, counts } = counted(env.store);
    const deps = pacedDeps(env, { store });

    const first = await reconcilePaced(deps, NEVER);
    expect(first.nodesChecked).toBe(3); // cycle 0 is a full one: nothing seen yet
    expect(first.drift).toEqual([]);
    // Eight more cycles (two hours at the default) with nothing changed: no lease read at all.
    for (let i = 0; i < 8; i++) {
      env.clock.advance(CYCLE_MS);
      const run = await reconcilePaced(deps, NEVER);
      expect(run.nodesVisited).toBe(3);
      expect(run.nodesChecked).toBe(0);
    }
    expect(counts.listLeases).toBe(3);

    // EC2 changes under one node (an address unassigned out of band): that node, and only it, is read.
    const eni = nodes[1]!.node.enis[0]!;
    await env.ec2.unassignPrivateIpAddresses(eni.eniId!, { ips: [eni.addresses[0]!] });
    env.clock.advance(CYCLE_MS);
    const changed = await reconcilePaced(deps, NEVER);
    expect(changed.nodesChecked).toBe(1);
    expect(changed.drift).toEqual([
      { kind: 'lease-without-address', instanceId: nodes[1]!.instanceId, eniId: eni.eniId, address: eni.addresses[0] },
    ]);
    // A node with drift is not recorded clean: it is read (and reported) every cycle until it is fixed; each
    // time a first look and a consistent one.
    env.clock.advance(CYCLE_MS);
    expect((await reconcilePaced(deps, NEVER)).drift).toHaveLength(1);
    expect(counts.listLeases).toBe(7);
  });

  it('looks at a node eventually consistent first, and reads it consistently only where that look finds drift', async () => {
    const env = await startEnv();
    const nodes = [await readyNode(env), await readyNode(env), await readyNode(env)];
    const { store, counts } = counted(env.store);
    const deps = pacedDeps(env, { store });
    const readsOfNodes = () => ({ leases: counts.consistentListLeases, nodes: counts.consistentGetNode });

    const first = await reconcilePaced(deps, NEVER);
    expect(first.nodesChecked).toBe(3);
    expect(first.drift).toEqual([]);
    // Three clean nodes: three first looks, no read at full price.
    expect(counts.listLeases).toBe(3);
    expect(readsOfNodes()).toEqual({ leases: 0, nodes: 0 });

    const eni = nodes[2]!.node.enis[0]!;
    await env.ec2.unassignPrivateIpAddresses(eni.eniId!, { ips: [eni.addresses[0]!] });
    env.clock.advance(CYCLE_MS);
    const changed = await reconcilePaced(deps, NEVER);
    // The drift is reported from the consistent read that confirmed it.
    expect(changed.drift.map((d) => d.address)).toEqual([eni.addresses[0]]);
    expect(readsOfNodes()).toEqual({ leases: 1, nodes: 1 });
  });

  it('control: with every cycle a full one (no digest), every cycle reads every node’s leases', async () => {
    const env = await startEnv();
    for (let i = 0; i < 3; i++) await readyNode(env);
    const { store, counts } = counted(env.store);
    const deps = pacedDeps(env, { store, driftFullEveryCycles: 1 });
    for (let i = 0; i < 4; i++) {
      await reconcilePaced(deps, NEVER);
      env.clock.advance(CYCLE_MS);
    }
    expect(counts.listLeases).toBe(12);
  });

  it('walks at most once per cycle: runs between cycles read no node', async () => {
    const env = await startEnv();
    for (let i = 0; i < 2; i++) await readyNode(env);
    const { store, counts } = counted(env.store);
    const deps = pacedDeps(env, { store });
    await reconcilePaced(deps, NEVER);
    const pages = counts.pages;
    for (let i = 0; i < 2; i++) {
      env.clock.advance(300_000); // the schedule's 5 minutes, inside the 15-minute cycle
      expect((await reconcilePaced(deps, NEVER)).nodesVisited).toBe(0);
    }
    expect(counts.pages).toBe(pages);
    env.clock.advance(300_000);
    expect((await reconcilePaced(deps, NEVER)).nodesVisited).toBe(2);
  });

  it('reads each shard’s drift digests once a run, however many pages the shard spans', async () => {
    const env = await startEnv();
    // Seventeen nodes in sixteen shards: at least one shard holds two, and with one node a page, two pages.
    const arns: string[] = [];
    for (let i = 0; i < 17; i++) arns.push((await readyNode(env)).instanceArn);
    const shardsHit = new Set(arns.map(nodeIndexShard));
    const cursor = new MemorySweepCursorStore();
    const digestLoads: string[] = [];
    const counting: SweepCursorStore = {
      load: (name) => {
        if (name.startsWith('drift-seen#')) digestLoads.push(name);
        return cursor.load(name);
      },
      save: (name, state, version) => cursor.save(name, state, version),
    };
    const deps = pacedDeps(env, { pageSize: 1, cursor: counting });
    const first = await reconcilePaced(deps, NEVER);
    expect(first.nodesVisited).toBe(17);
    expect(digestLoads.length).toBe(shardsHit.size);
    // The next cycle finds every digest saved (nothing changed): the same one read a shard, and no node read.
    env.clock.advance(CYCLE_MS);
    digestLoads.length = 0;
    expect((await reconcilePaced(deps, NEVER)).nodesChecked).toBe(0);
    expect(digestLoads.length).toBe(shardsHit.size);
  });

  it('stops at its deadline and the next run carries on where it stopped', async () => {
    const env = await startEnv();
    for (let i = 0; i < 3; i++) await readyNode(env);
    // Each index page takes 10 ms of the (manual) clock; the deadline allows two pages to start.
    const e = env;
    const { store } = counted(env.store, () => e.clock.advance(10));
    const deps = pacedDeps(env, { store, pageSize: 1 });
    const startMs = env.clock.nowMs();
    const first = await reconcilePaced(deps, startMs + 15);
    expect([first.nodesVisited, first.stoppedEarly, first.cycleDone]).toEqual([2, true, false]);
    const second = await reconcilePaced(deps, NEVER);
    expect([second.nodesVisited, second.cycle, second.cycleDone]).toEqual([1, 0, true]);
  });
});

describe('Paced reconciler: the stray search', () => {
  it('scans rarely, marks on the first look and removes only on a second look a mark-age later', async () => {
    const env = await startEnv();
    const live = await readyNode(env);
    const [template] = expectedLeases(live.node, 1);
    const strayArn = instanceArn(REGION, ACCOUNT, 'i-0000000000000beef', 'aws'); // unknown to EC2
    await env.store.putLeases([{ ...template!, instanceArn: strayArn }], env.clock.nowMs());
    const deps = pacedDeps(env, { strayScanPeriodMs: 86_400_000 });

    const first = await reconcilePaced(deps, NEVER);
    expect(first.strays.scanPages).toBeGreaterThan(0);
    expect(first.strayLeases.map((s) => [s.instanceArn, s.action])).toEqual([[strayArn, 'mark']]);
    expect(await env.store.listLeases(strayArn)).toHaveLength(1);
    // The second look comes from the mark, not from another Scan: too soon, it waits.
    env.clock.advance(MARK_AGE_MS - 1);
    const early = await reconcilePaced(deps, NEVER);
    expect([early.strays.scanPages, early.strayLeases[0]?.action]).toEqual([0, 'wait']);
    expect(await env.store.listLeases(strayArn)).toHaveLength(1);
    env.clock.advance(1);
    const second = await reconcilePaced(deps, NEVER);
    expect([second.strays.scanPages, second.strayLeases[0]?.action]).toEqual([0, 'remove']);
    expect(await env.store.listLeases(strayArn)).toEqual([]);
    expect(await env.store.listLeases(live.instanceArn)).toHaveLength(6);

    // A partition that goes stray after the Scan waits for the next one: none until a day has passed.
    const laterArn = instanceArn(REGION, ACCOUNT, 'i-0000000000000f00d', 'aws');
    await env.store.putLeases([{ ...template!, instanceArn: laterArn }], env.clock.nowMs());
    env.clock.advance(86_400_000 - MARK_AGE_MS - 1);
    const beforeDay = await reconcilePaced(deps, NEVER);
    expect([beforeDay.strays.scanPages, beforeDay.strayLeases]).toEqual([0, []]);
    env.clock.advance(1);
    const nextDay = await reconcilePaced(deps, NEVER);
    expect(nextDay.strays.scanPages).toBeGreaterThan(0);
    expect(nextDay.strayLeases.map((s) => [s.instanceArn, s.action])).toEqual([[laterArn, 'mark']]);
  });

  it('a partition whose node item comes back between the looks is not removed', async () => {
    const env = await startEnv();
    const node = await readyNode(env);
    const deps = pacedDeps(env);
    // Its node item deleted by hand (an operator), the instance terminated: stray on the first look.
    env.sim.api.terminateInstance(node.instanceId);
    await new Promise((resolve) => setTimeout(resolve, 20)); // the simulator's shutdown timer (scaled to 0)
    const saved = node.node;
    await env.api.deleteItem({
      TableName: env.tableName,
      Key: { pk: { S: node.instanceArn }, sk: { S: 'node' } },
    });
    const first = await reconcilePaced(deps, NEVER);
    expect(first.strayLeases.map((s) => s.action)).toEqual(['mark']);
    await env.store.createNode({ ...saved, phase: 'DRAINING', updatedAtMs: env.clock.nowMs(), version: 1 });
    env.clock.advance(MARK_AGE_MS);
    const second = await reconcilePaced(deps, NEVER);
    expect(second.strayLeases).toEqual([]);
    expect(await env.store.listLeases(node.instanceArn)).toHaveLength(6);
    expect(await deps.leasePartitions!.strayMarks()).toEqual(new Map()); // the stale mark is cleared
  });
});

describe('Paced reconciler: gone nodes and the page span', () => {
  it('marks a terminated node on one cycle and removes its partition on the next', async () => {
    const env = await startEnv({ config: { eniMinAgeForGcMs: 1000 } });
    const keep = await readyNode(env);
    const gone = await readyNode(env);
    env.sim.api.terminateInstance(gone.instanceId);
    await new Promise((resolve) => setTimeout(resolve, 20));
    env.clock.advance(2000);
    const deps = pacedDeps(env);
    expect((await reconcilePaced(deps, NEVER)).partitionsMarkedGone).toEqual([gone.instanceArn]);
    expect(await env.store.listLeases(gone.instanceArn)).toHaveLength(6);
    env.clock.advance(CYCLE_MS);
    expect((await reconcilePaced(deps, NEVER)).partitionsRemoved).toEqual([gone.instanceArn]);
    expect(await env.store.getNode(gone.instanceArn)).toBeUndefined();
    expect(await env.store.listLeases(keep.instanceArn)).toHaveLength(6);
  });

  it('places an ARN in exactly one page of a walk', async () => {
    const arns = Array.from({ length: 200 }, (_, i) =>
      instanceArn(REGION, ACCOUNT, `i-${(0xabc000 + i).toString(16).padStart(17, '0')}`, 'aws'),
    );
    const spans = [
      { from: { shard: 0 }, next: { shard: 3, afterArn: arns[7]! } },
      { from: { shard: 3, afterArn: arns[7]! }, next: { shard: 9 } },
      { from: { shard: 9 } },
    ];
    for (const arn of arns) expect(spans.filter((s) => inSpan(arn, s))).toHaveLength(1);
  });
});
