import { afterEach, describe, expect, it } from 'vitest';
import type { NewLease } from '../../shared/domain/lease.js';
import type { NodeRecord } from '../../shared/domain/node.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import { METRIC_NAMES } from '../../shared/metrics.js';
import { manageNodePool } from '../../shared/pool/pool-manager.js';
import { planRelease } from '../../shared/pool/release-plan.js';
import { sweepPools } from '../../shared/pool/sweep.js';
import { claimOne, type PoolEnv, type ReadyNode, readyNode, startPoolEnv } from './support.js';

/**
 * Invariant 8 against the EC2 simulator through the SDK: leases an attacker node forged into its own
 * partition (as an older, wider node policy allowed, issue 14) make the pool-manager touch nothing in EC2
 * outside the attacker's instance, and every rejection is counted.
 */
let env: PoolEnv | undefined;

afterEach(async () => {
  await env?.close();
  env = undefined;
});

const RELEASE_DELAY_MS = 300_000;
const RESUME_AFTER_MS = 120_000;

/** EC2 calls that change something, by action, as the simulator counted them. */
function mutationCounts(e: PoolEnv): Record<string, number> {
  return Object.fromEntries(
    Object.entries(e.sim.admin.counts())
      .filter(([action, c]) => !action.startsWith('Describe') && (c.ok ?? 0) > 0)
      .map(([action, c]) => [action, c.ok ?? 0]),
  );
}

let baseline: Record<string, number> = {};
/** Starts counting the pass under test: the setup's own EC2 calls are not its. */
function startCounting(e: PoolEnv): void {
  baseline = mutationCounts(e);
}

/** The mutating EC2 calls since startCounting. */
function mutations(e: PoolEnv): Record<string, number> {
  return Object.fromEntries(
    Object.entries(mutationCounts(e))
      .map(([action, n]) => [action, n - (baseline[action] ?? 0)] as const)
      .filter(([, n]) => n > 0),
  );
}

const rejected = (e: PoolEnv, reason?: string): number =>
  e.metrics.total(METRIC_NAMES.untrustedLeaseRejected, reason ? { Reason: reason } : {});

/** The victim's ENI as EC2 shows it. */
async function victimEni(e: PoolEnv, victim: ReadyNode) {
  const [eni] = await e.ec2.describeNetworkInterfaces({ eniIds: [victim.node.enis[0]!.eniId!] });
  return { ips: [...(eni?.secondaryIps ?? [])].sort(), prefixes: [...(eni?.prefixes ?? [])] };
}

/** Leases in the attacker's partition that copy the victim's ENI and addresses. */
function forged(attacker: ReadyNode, victim: NodeRecord, ips: readonly string[], prefix?: string): NewLease[] {
  const eni = victim.enis[0]!;
  return ips.map((ip) => ({
    instanceArn: attacker.instanceArn,
    ip,
    eniId: eni.eniId!,
    deviceIndex: eni.deviceIndex,
    mac: eni.mac!,
    subnetId: eni.subnetId,
    subnetCidr: eni.subnetCidr!,
    gateway: '10.0.0.1',
    ...(prefix !== undefined ? { prefix } : {}),
  }));
}

describe('Pool: leases a node forged are never acted on (invariant 8)', () => {
  it('unassigns nothing when a node forges FREE leases copying another node’s CLAIMED addresses', async () => {
    env = await startPoolEnv();
    const victim = await readyNode(env, { enis: [{ ipCount: 6 }] });
    const attacker = await readyNode(env, { enis: [{ ipCount: 6 }] });
    const held = [await claimOne(env, victim.instanceArn), await claimOne(env, victim.instanceArn)];
    const copied = victim.node.enis[0]!.addresses;
    await env.store.putLeases(forged(attacker, victim.node, copied), env.clock.nowMs());
    env.clock.advance(RELEASE_DELAY_MS);
    const before = await victimEni(env, victim);
    // Negative control: taken at face value, the forged leases are excess the pool would release — on the
    // victim's ENI.
    const leases = await env.store.listLeases(attacker.instanceArn);
    const naive = planRelease(leases, leases.length - 6, env.clock.nowMs(), RELEASE_DELAY_MS);
    expect(naive.some((g) => g.eniId === victim.node.enis[0]!.eniId)).toBe(true);

    startCounting(env);
    const report = await manageNodePool(env.deps(), attacker.instanceArn);

    expect(mutations(env)).toEqual({});
    expect(report.released).toEqual([]);
    expect(await victimEni(env, victim)).toEqual(before);
    for (const pod of held) expect(before.ips).toContain(pod.ip);
    expect(rejected(env, 'not-recorded')).toBe(copied.length);
  });

  it('unassigns no /28 when a node forges leases of another node’s delegated prefix', async () => {
    env = await startPoolEnv({ config: { prefixDelegation: true } });
    const victim = await readyNode(env, { enis: [{ prefixCount: 1 }] });
    const attacker = await readyNode(env, { enis: [{ ipCount: 6 }] });
    const prefix = victim.node.enis[0]!.prefixes[0]!;
    const victimLeases = await env.store.listLeases(victim.instanceArn);
    await env.store.putLeases(
      forged(
        attacker,
        victim.node,
        victimLeases.map((l) => l.ip),
        prefix,
      ),
      env.clock.nowMs(),
    );
    env.clock.advance(RELEASE_DELAY_MS);
    const before = await victimEni(env, victim);
    expect(before.prefixes).toEqual([prefix]);

    startCounting(env);
    await manageNodePool(env.deps(), attacker.instanceArn);

    expect(mutations(env)).toEqual({});
    expect(await victimEni(env, victim)).toEqual(before);
    expect(rejected(env, 'not-recorded')).toBe(victimLeases.length);
  });

  it('does not unassign, on resume, an address a node marked RELEASING that EC2 shows on another instance', async () => {
    env = await startPoolEnv();
    const victim = await readyNode(env, { enis: [{ ipCount: 6 }] });
    const attacker = await readyNode(env, { enis: [{ ipCount: 6 }] });
    const pod = await claimOne(env, victim.instanceArn);
    await env.store.putLeases(forged(attacker, victim.node, [pod.ip]), env.clock.nowMs());
    // What a node's UpdateItem may do to its own lease: set the state (and times) it likes.
    await env.api.updateItem({
      TableName: env.tableName,
      Key: { pk: { S: attacker.instanceArn }, sk: { S: `ip#${pod.ip}` } },
      UpdateExpression: 'SET st = :releasing, rl = :old REMOVE cAt',
      ExpressionAttributeValues: { ':releasing': { S: 'RELEASING' }, ':old': { N: '0' } },
    });
    env.clock.advance(RESUME_AFTER_MS + 1);

    startCounting(env);
    await manageNodePool(env.deps(), attacker.instanceArn);

    expect(mutations(env)).toEqual({});
    expect((await victimEni(env, victim)).ips).toContain(pod.ip);
    expect(rejected(env)).toBeGreaterThan(0);
  });

  it('asks EC2 before an Unassign even when the node item agrees: an ENI attached elsewhere is refused', async () => {
    env = await startPoolEnv();
    const victim = await readyNode(env, { enis: [{ ipCount: 6 }] });
    const attacker = await readyNode(env, { enis: [{ ipCount: 6 }] });
    // A corrupted record (no node can write it; this isolates the EC2 check): the attacker's node item names
    // the victim's ENI too, with FREE leases for its addresses.
    const stolen = { ...victim.node.enis[0]!, deviceIndex: 2 };
    await env.store.updateNode({ ...attacker.node, enis: [...attacker.node.enis, stolen] }, attacker.node.version);
    await env.store.putLeases(
      forged(attacker, { ...victim.node, enis: [stolen] }, stolen.addresses),
      env.clock.nowMs(),
    );
    env.clock.advance(RELEASE_DELAY_MS);
    const before = await victimEni(env, victim);

    startCounting(env);
    await manageNodePool(env.deps(), attacker.instanceArn);

    // The attacker's own excess may go; nothing of the victim's does.
    expect(Object.keys(mutations(env)).filter((a) => a !== 'UnassignPrivateIpAddresses')).toEqual([]);
    expect(await victimEni(env, victim)).toEqual(before);
    expect(rejected(env, 'eni-elsewhere')).toBeGreaterThan(0);
  });

  it('releases the node’s own excess as before (positive control: the checks pass for honest leases)', async () => {
    env = await startPoolEnv();
    const honest = await readyNode(env, { enis: [{ ipCount: 9 }] });
    env.clock.advance(RELEASE_DELAY_MS);

    startCounting(env);
    const report = await manageNodePool(env.deps(), honest.instanceArn);

    expect(report.released).toHaveLength(3);
    expect(mutations(env)).toEqual({ UnassignPrivateIpAddresses: 1 });
    expect(rejected(env)).toBe(0);
  });

  it('skips and reports items that do not decode, and sweeps the other nodes', async () => {
    env = await startPoolEnv();
    const victim = await readyNode(env, { enis: [{ ipCount: 6 }] });
    const attacker = await readyNode(env, { enis: [{ ipCount: 6 }] });
    const illFormed: string[] = [];
    const store = new DynamoLeaseStore({
      api: env.api,
      tableName: env.tableName,
      onIllFormedItem: (key) => illFormed.push(`${key.sk}`),
    });
    // All a node's UpdateItem can create: an item with only the attributes of a claim (no ENI, no MAC).
    for (const sk of ['ip#10.0.15.1', 'node-x']) {
      await env.api.updateItem({
        TableName: env.tableName,
        Key: { pk: { S: attacker.instanceArn }, sk: { S: sk } },
        UpdateExpression: 'SET st = :free, v = :one, cAt = :zero',
        ExpressionAttributeValues: { ':free': { S: 'FREE' }, ':one': { N: '1' }, ':zero': { N: '0' } },
      });
    }
    await claimOne(env, victim.instanceArn);
    await claimOne(env, victim.instanceArn);
    await claimOne(env, victim.instanceArn);
    await claimOne(env, victim.instanceArn);

    const sweep = await sweepPools(env.deps({ store }));

    expect(sweep.failed).toEqual([]);
    expect(illFormed).toEqual(['ip#10.0.15.1']);
    // The victim, low on claimable leases, was still topped up in the same sweep.
    expect(sweep.reports.find((r) => r.instanceArn === victim.instanceArn)?.leased.length).toBeGreaterThan(0);
  });
});
