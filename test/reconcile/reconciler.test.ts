import { describe, expect, it } from 'vitest';
import { instanceArn } from '../../shared/domain/arn.js';
import type { NodeRecord } from '../../shared/domain/node.js';
import { eniClientToken, podEniTags } from '../../shared/ec2/tags.js';
import { expectedLeases } from '../../shared/lifecycle/pod-eni.js';
import { manageNodePool } from '../../shared/pool/pool-manager.js';
import { GC_MARK_TAG, GONE_RETENTION_MS } from '../../shared/reconcile/gc-plan.js';
import { DynamoLeasePartitions } from '../../shared/reconcile/lease-partitions.js';
import { type ReconcilerDeps, reconcile } from '../../shared/reconcile/reconciler.js';
import { ACCOUNT, claimOne, invariantViolations, type PoolEnv, REGION, readyNode } from '../pool/support.js';
import { MARK_AGE_MS, poolEnvPerTest, reconcilerDeps } from './support/harness.js';

const startEnv = poolEnvPerTest();

const MIN_AGE_MS = 600_000;

/** An ENI as the lifecycle creates it (tags, ClientToken) — and then never attaches: a leak once old. */
async function createdEni(e: PoolEnv, instanceId: string, deviceIndex: number, createdAtMs: number): Promise<string> {
  const request = { subnetId: e.subnetId, ipCount: 2, prefixCount: 0 };
  const eni = await e.ec2.createNetworkInterface({
    ...request,
    securityGroupIds: [],
    tags: podEniTags(e.config.clusterName, instanceId, deviceIndex, createdAtMs),
    clientToken: eniClientToken(instanceId, deviceIndex, request),
  });
  return eni.eniId;
}

async function eniIds(e: PoolEnv): Promise<Map<string, Record<string, string>>> {
  const enis = await e.ec2.describeNetworkInterfaces({ tags: { 'vpc-lease:cluster': e.config.clusterName } });
  return new Map(enis.map((x) => [x.eniId, x.tags]));
}

describe('Reconciler: leaked ENIs', () => {
  it('deletes a leaked ENI after two passes, and never a young, an attaching or an in-progress one', async () => {
    const env = await startEnv();
    const t0 = env.clock.nowMs();
    const a = await readyNode(env);
    const leaked = await createdEni(env, a.instanceId, 5, t0);
    // Node B: a launch in progress (its node item written a moment ago), one ENI created and not attached yet.
    const b = env.sim.api.launchInstance({ instanceType: 'm5.large', subnetId: env.subnetId });
    const inProgress = await createdEni(env, b.instanceId, 1, t0);
    env.clock.advance(MIN_AGE_MS + 1);
    const nodeB: NodeRecord = {
      instanceArn: instanceArn(REGION, ACCOUNT, b.instanceId, 'aws'),
      instanceId: b.instanceId,
      instanceType: 'm5.large',
      availabilityZone: b.availabilityZone,
      podSubnetIds: [env.subnetId],
      phase: 'PROVISIONING',
      enis: [],
      maxPods: 110,
      createdAtMs: t0,
      updatedAtMs: env.clock.nowMs(),
      version: 1,
    };
    await env.store.createNode(nodeB);
    const fresh = await createdEni(env, a.instanceId, 6, env.clock.nowMs());
    // An old ENI whose attachment is under way right now (EC2 reports it in use, attaching).
    const attaching = await createdEni(env, a.instanceId, 2, t0);
    env.sim.admin.pauseAttachments();
    const attachmentId = await env.ec2.attachNetworkInterface({
      eniId: attaching,
      instanceId: a.instanceId,
      deviceIndex: 2,
      networkCardIndex: 0,
    });

    const first = await reconcile(reconcilerDeps(env));

    expect(first.marked).toEqual([leaked]);
    expect(first.deleted).toEqual([]);
    expect((await eniIds(env)).get(leaked)?.[GC_MARK_TAG]).toBe(new Date(env.clock.nowMs()).toISOString());

    // A second look right away is not a second pass: the mark must age first.
    env.clock.advance(MARK_AGE_MS - 1);
    expect((await reconcile(reconcilerDeps(env))).deleted).toEqual([]);
    env.clock.advance(1);
    const third = await reconcile(reconcilerDeps(env));

    expect(third.deleted).toEqual([leaked]);
    const left = await eniIds(env);
    expect(left.has(leaked)).toBe(false);
    for (const kept of [fresh, attaching, inProgress]) {
      expect(left.has(kept)).toBe(true);
      expect(left.get(kept)?.[GC_MARK_TAG]).toBeUndefined();
    }
    expect(env.metrics.total('ReconcilerEnisDeleted')).toBe(1);

    // Let the attach finish as its launch would (DeleteOnTermination, recorded on the node), then check.
    env.sim.admin.resumeAttachments();
    await env.ec2.setDeleteOnTermination(attaching, attachmentId, true);
    const nodeA = (await env.store.getNode(a.instanceArn))!;
    await env.store.updateNode(
      {
        ...nodeA,
        enis: [
          ...nodeA.enis,
          {
            deviceIndex: 2,
            networkCardIndex: 0,
            subnetId: env.subnetId,
            clientToken: 'x',
            step: 'LEASED',
            eniId: attaching,
            attachmentId,
            addresses: [],
            prefixes: [],
          },
        ],
      },
      nodeA.version,
    );
    await env.ec2.unassignPrivateIpAddresses(attaching, {
      ips: (await env.ec2.describeNetworkInterfaces({ eniIds: [attaching] }))[0]!.secondaryIps,
    });

    // Once old enough, the ENI that was fresh goes the same way, and so does the stalled launch's.
    env.clock.advance(MIN_AGE_MS);
    expect([...(await reconcile(reconcilerDeps(env))).marked].sort()).toEqual([fresh, inProgress].sort());
    env.clock.advance(MARK_AGE_MS);
    expect([...(await reconcile(reconcilerDeps(env))).deleted].sort()).toEqual([fresh, inProgress].sort());
    expect((await eniIds(env)).has(attaching)).toBe(true);
    expect(await invariantViolations(env, MIN_AGE_MS)).toBe('');
  });

  it('unmarks an ENI that was attached between the two passes instead of deleting it', async () => {
    const env = await startEnv();
    const t0 = env.clock.nowMs();
    const a = await readyNode(env);
    const late = await createdEni(env, a.instanceId, 2, t0);
    env.clock.advance(MIN_AGE_MS + 1);
    expect((await reconcile(reconcilerDeps(env))).marked).toEqual([late]);

    await env.ec2.attachNetworkInterface({
      eniId: late,
      instanceId: a.instanceId,
      deviceIndex: 2,
      networkCardIndex: 0,
    });
    env.clock.advance(MARK_AGE_MS);
    const second = await reconcile(reconcilerDeps(env));

    expect(second.deleted).toEqual([]);
    expect(second.unmarked).toEqual([late]);
    expect((await eniIds(env)).get(late)?.[GC_MARK_TAG]).toBeUndefined();
  });
});

describe('Reconciler: gone instances', () => {
  it('removes the leases and node item of a terminated instance, but not of one just launched', async () => {
    const env = await startEnv();
    const old = await readyNode(env);
    const running = await readyNode(env);
    env.clock.advance(MIN_AGE_MS);
    const young = await readyNode(env);
    env.sim.api.terminateInstance(old.instanceId);
    env.sim.api.terminateInstance(young.instanceId);
    await new Promise((resolve) => setTimeout(resolve, 20)); // the simulator's shutdown timer (scaled to 0)

    // Two observations a mark age apart (never one DescribeInstances snapshot).
    const first = await reconcile(reconcilerDeps(env));
    expect(first.partitionsRemoved).toEqual([]);
    expect(first.partitionsMarkedGone).toEqual([old.instanceArn]);
    expect(await env.store.listLeases(old.instanceArn)).toHaveLength(6);
    env.clock.advance(MARK_AGE_MS);
    const report = await reconcile(reconcilerDeps(env));

    expect(report.partitionsRemoved).toEqual([old.instanceArn]);
    expect(await env.store.getNode(old.instanceArn)).toBeUndefined();
    expect(await env.store.listLeases(old.instanceArn)).toEqual([]);
    expect(await env.store.getNode(young.instanceArn)).toBeDefined();
    env.clock.advance(MIN_AGE_MS);
    expect((await reconcile(reconcilerDeps(env))).partitionsMarkedGone).toEqual([young.instanceArn]);
    env.clock.advance(MARK_AGE_MS);
    expect((await reconcile(reconcilerDeps(env))).partitionsRemoved).toEqual([young.instanceArn]);
    // An instance EC2 reports running keeps its node, however old.
    expect((await env.store.getNode(running.instanceArn))?.phase).toBe('READY');
    expect(await env.store.listLeases(running.instanceArn)).toHaveLength(6);
    expect(await invariantViolations(env)).toBe('');
  });

  it('keeps the leases of an instance that is missing from one DescribeInstances snapshot only', async () => {
    const env = await startEnv();
    const flaky = await readyNode(env);
    const pod = await claimOne(env, flaky.instanceArn);
    env.clock.advance(MIN_AGE_MS);
    // Eventual consistency: one snapshot lacks the (running) instance, the next has it again.
    let hidden = 1;
    const lagging: ReconcilerDeps['ec2'] = Object.assign(Object.create(env.ec2), {
      describeInstanceStates: async (ids: readonly string[]) => {
        const states = await env!.ec2.describeInstanceStates(ids);
        if (hidden-- > 0) states.delete(flaky.instanceId);
        return states;
      },
    });
    const withLag = { ...reconcilerDeps(env), ec2: lagging };

    const first = await reconcile(withLag);
    env.clock.advance(MARK_AGE_MS);
    const second = await reconcile(withLag);
    env.clock.advance(MARK_AGE_MS);
    const third = await reconcile(withLag);

    expect(first.partitionsMarkedGone).toEqual([flaky.instanceArn]); // negative control: the lag was seen
    expect([...first.partitionsRemoved, ...second.partitionsRemoved, ...third.partitionsRemoved]).toEqual([]);
    expect((await env.store.getNode(flaky.instanceArn))?.goneSeenAtMs).toBeUndefined();
    const leases = await env.store.listLeases(flaky.instanceArn);
    expect(leases).toHaveLength(6);
    expect(leases.find((l) => l.ip === pod.ip)?.state).toBe('CLAIMED');
  });
});

describe('Reconciler: drift', () => {
  it('logs and counts a lease without address and an address without lease', async () => {
    const env = await startEnv();
    const a = await readyNode(env);
    const eniId = a.node.enis[0]!.eniId!;
    const victim = a.node.enis[0]!.addresses[0]!;
    await env.ec2.unassignPrivateIpAddresses(eniId, { ips: [victim] });
    const extra = await env.ec2.assignPrivateIpAddresses(eniId, { ipCount: 1 });
    env.clock.advance(120_000);

    const report = await reconcile(reconcilerDeps(env));

    expect(report.drift.map((d) => [d.kind, d.address]).sort()).toEqual(
      [
        ['address-without-lease', extra.ips[0]],
        ['lease-without-address', victim],
      ].sort(),
    );
    expect(env.metrics.total('DriftLeaseWithoutAddress')).toBe(1);
    expect(env.metrics.total('DriftAddressWithoutLease')).toBe(1);
    expect(env.metrics.total('DriftEniWithoutNode')).toBe(0);
    expect(env.logs.filter((l) => l.includes('drift between EC2 and the lease table'))).toHaveLength(2);
    // The same disagreement the invariant checker flags.
    expect(await invariantViolations(env)).toMatch(/invariant 2: lease .* is not assigned/);
  });
});

describe('Reconciler and pool-manager together', () => {
  it('collects a pool ENI stuck unattached; the pool forgets it and adds a fresh one', async () => {
    const env = await startEnv();
    const { instanceArn, instanceId } = await readyNode(env, { enis: [{ ipCount: 9 }] });
    for (let i = 0; i < 8; i++) await claimOne(env, instanceArn);
    env.sim.admin.failNext({ action: 'AttachNetworkInterface', code: 'InternalError', count: 1000 });
    await expect(manageNodePool(env.deps(), instanceArn)).rejects.toThrow(/InternalError/);
    const stuck = (await env.store.getNode(instanceArn))!.enis[1]!;
    expect(stuck.step).toBe('CREATED');

    env.clock.advance(MIN_AGE_MS);
    expect((await reconcile(reconcilerDeps(env))).marked).toEqual([stuck.eniId]);
    env.clock.advance(MARK_AGE_MS);
    expect((await reconcile(reconcilerDeps(env))).deleted).toEqual([stuck.eniId]);
    env.sim.admin.clearFaults();

    await manageNodePool(env.deps(), instanceArn); // finds it gone: drops the record
    expect((await env.store.getNode(instanceArn))!.enis.map((e) => e.step)).toEqual(['LEASED']);
    await manageNodePool(env.deps(), instanceArn); // plans and builds a fresh one (new ClientToken)
    const node = (await env.store.getNode(instanceArn))!;
    expect(node.enis.map((e) => e.step)).toEqual(['LEASED', 'LEASED']);
    expect(node.enis[1]!.eniId).not.toBe(stuck.eniId);
    const enis = await env.ec2.describeNetworkInterfaces({ tags: { 'vpc-lease:instance-id': instanceId } });
    expect(enis.map((e) => e.eniId).sort()).toEqual(node.enis.map((e) => e.eniId!).sort());
    expect(await invariantViolations(env)).toBe('');
  });
});

describe('Reconciler: stray leases and GONE items', () => {
  it('removes leases no node item stands for, keeps GONE items for their retention, then prunes them', async () => {
    const env = await startEnv();
    const live = await readyNode(env);
    const gone = await readyNode(env);
    const [template] = expectedLeases(gone.node, 1);
    env.sim.api.terminateInstance(gone.instanceId);
    await new Promise((resolve) => setTimeout(resolve, 20)); // the simulator's shutdown timer (scaled to 0)
    // Terminate as the lifecycle does it (partition removed, GONE written)… then a late lease put lands.
    await env.store.deleteNodePartition(gone.instanceArn);
    await env.store.createNode({ ...gone.node, phase: 'GONE', updatedAtMs: env.clock.nowMs(), version: 1 });
    await env.store.putLeases([template!], env.clock.nowMs());
    // Leases with no node item at all: of an instance EC2 does not know, and of a running one.
    const unknownArn = instanceArn(REGION, ACCOUNT, 'i-0000000000000beef', 'aws');
    const running = env.sim.api.launchInstance({ instanceType: 'm5.large', subnetId: env.subnetId });
    const runningArn = instanceArn(REGION, ACCOUNT, running.instanceId, 'aws');
    await env.store.putLeases(
      [
        { ...template!, instanceArn: unknownArn },
        { ...template!, instanceArn: runningArn },
      ],
      env.clock.nowMs(),
    );
    const withScan = reconcilerDeps(env, { leasePartitions: new DynamoLeasePartitions(env.api, env.tableName) });

    const report = await reconcile(withScan);

    expect(report.strayLeases.map((s) => [s.instanceArn, s.action]).sort()).toEqual(
      [
        [gone.instanceArn, 'remove'],
        [unknownArn, 'mark'],
        [runningArn, 'report'],
      ].sort(),
    );
    expect(report.partitionsRemoved).toEqual([]);
    expect(await env.store.listLeases(gone.instanceArn)).toEqual([]);
    expect((await env.store.getNode(gone.instanceArn))?.phase).toBe('GONE'); // the audit item is kept
    // One DescribeInstances snapshot that misses an instance is not proof: the first look only marks.
    expect(await env.store.listLeases(unknownArn)).toHaveLength(1);
    expect(await env.store.listLeases(runningArn)).toHaveLength(1);
    expect(await env.store.listLeases(live.instanceArn)).toHaveLength(6);
    expect(env.metrics.total('ReconcilerStrayLeasePartitions')).toBe(3);

    // A second look too soon waits; one at least the mark age later, still seeing it gone, removes.
    env.clock.advance(MARK_AGE_MS - 1);
    const early = await reconcile(withScan);
    expect(early.strayLeases.find((s) => s.instanceArn === unknownArn)?.action).toBe('wait');
    expect(await env.store.listLeases(unknownArn)).toHaveLength(1);
    env.clock.advance(1);
    const second = await reconcile(withScan);
    expect(second.strayLeases.find((s) => s.instanceArn === unknownArn)?.action).toBe('remove');
    expect(await env.store.listLeases(unknownArn)).toEqual([]);
    expect(await withScan.leasePartitions!.strayMarks()).toEqual(new Map());
    expect(await env.store.listLeases(runningArn)).toHaveLength(1);

    // Without the scan, a pass finds none of that (and the GONE item stays until its retention is over).
    env.clock.advance(GONE_RETENTION_MS - MARK_AGE_MS - 1); // the GONE item was written before the two looks
    expect((await reconcile(reconcilerDeps(env))).partitionsRemoved).toEqual([]);
    env.clock.advance(1);
    const later = await reconcile(withScan);
    expect(later.partitionsRemoved).toEqual([gone.instanceArn]);
    expect(await env.store.getNode(gone.instanceArn)).toBeUndefined();
    expect((await env.store.getNode(live.instanceArn))?.phase).toBe('READY');
  });
});
