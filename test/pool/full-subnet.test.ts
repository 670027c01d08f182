import { afterEach, describe, expect, it } from 'vitest';
import type { PoolDeps } from '../../shared/pool/deps.js';
import { manageNodePool } from '../../shared/pool/pool-manager.js';
import { DEFAULT_SUBNET_REFUSAL_HOLD_MS } from '../../shared/pool/subnet-holds.js';
import { fillSubnet } from '../chaos/fill-subnets.js';
import { claimOne, invariantViolations, type PoolEnv, type ReadyNode, readyNode, startPoolEnv } from './support.js';

/**
 * The pool's top-up when Assign on an existing ENI is refused because the ENI's subnet is full, through the
 * simulator's own subnet accounting (another tenant takes the addresses; no injected faults): the rest goes
 * to a new ENI in another configured subnet of the AZ, or single addresses in prefix mode where configured,
 * the refusal is recorded and counted, and the full subnet is left alone for the hold instead of every pass.
 */
let env: PoolEnv | undefined;

afterEach(async () => {
  await env?.close();
  env = undefined;
});

interface FullSubnetCase {
  readonly env: PoolEnv;
  readonly full: string;
  readonly spare: string | undefined;
  readonly node: ReadyNode;
}

/**
 * A READY node whose one pod ENI is in `full` (a /24 or /26 of the AZ), with `spare` (a /25) configured beside
 * it unless `spare: false`; `full` is then exhausted or fragmented by another tenant, and pods claim until the
 * pool must top up.
 */
async function fullSubnetCase(options: {
  mode: 'exhaust' | 'fragment';
  spare?: boolean;
  enis: readonly { ipCount?: number; prefixCount?: number }[];
  claims: number;
  maxPods?: number;
  config?: Record<string, unknown>;
}): Promise<FullSubnetCase> {
  const e = await startPoolEnv({ config: options.config ?? {} });
  env = e;
  const fullCidr = options.mode === 'fragment' ? '10.0.32.0/24' : '10.0.32.0/26';
  const full = e.sim.admin.seedSubnet(e.vpcId, fullCidr, 'us-east-1a').subnetId;
  const spare =
    options.spare === false ? undefined : e.sim.admin.seedSubnet(e.vpcId, '10.0.33.0/25', 'us-east-1a').subnetId;
  const podSubnetIds = spare ? [full, spare] : [full];
  e.config = { ...e.config, podSubnetIds };
  const node = await readyNode(e, {
    subnetId: full,
    podSubnetIds,
    enis: options.enis,
    ...(options.maxPods !== undefined ? { maxPods: options.maxPods } : {}),
  });
  await fillSubnet(full, options.mode, e.ec2.client);
  for (let i = 0; i < options.claims; i++) await claimOne(e, node.instanceArn);
  e.sim.admin.resetCounts();
  return { env: e, full, spare, node };
}

/** Prefix mode, the node's /28 ENI in a subnet fragmented so no /28 is left, and no other subnet. */
function fragmentedAlone(prefixFallbackToAddresses: boolean): Promise<FullSubnetCase> {
  return fullSubnetCase({
    mode: 'fragment',
    spare: false,
    enis: [{ prefixCount: 1 }],
    claims: 14,
    config: { prefixDelegation: true, prefixFallbackToAddresses },
  });
}

function calls(e: PoolEnv): Record<string, number> {
  return Object.fromEntries(Object.entries(e.sim.admin.counts()).map(([action, c]) => [action, c.ok + c.errors]));
}

const refusedBy = (e: PoolEnv): Record<string, number> => e.metrics.totalsBy('SubnetFull', 'Reason');

describe('Function: manageNodePool › Assign refused for a full subnet (issue 25)', () => {
  it('tops up in another subnet of the AZ, records the refusal and stays within max-pods', async () => {
    // m5.large: 9 secondary slots per ENI, so the refused ENI itself still had room; max-pods 7 caps the top-up.
    const c = await fullSubnetCase({ mode: 'exhaust', enis: [{ ipCount: 4 }], claims: 3, maxPods: 7 });
    const { env: e, full, spare, node } = c;

    const report = await manageNodePool(e.deps(), node.instanceArn);

    // Wanted: high 6 − 1 spare = 5, capped by max-pods 7 − 4 held = 3; all of it in the spare subnet.
    expect(report.needed).toBe(3);
    expect(report.leased).toHaveLength(3);
    expect(report.shortfall).toBe(0);
    expect(e.sim.admin.counts()['AssignPrivateIpAddresses']).toMatchObject({ ok: 0, errors: 1 });
    const after = (await e.store.getNode(node.instanceArn))!;
    expect(after.enis.map((r) => [r.deviceIndex, r.subnetId, r.step])).toEqual([
      [1, full, 'LEASED'],
      [2, spare, 'LEASED'],
    ]);
    const leases = await e.store.listLeases(node.instanceArn);
    expect(leases).toHaveLength(7);
    expect(
      leases
        .filter((l) => l.subnetId === spare)
        .map((l) => l.ip)
        .sort(),
    ).toEqual([...report.leased].sort());
    expect(after.subnetRefusals?.map((r) => [r.subnetId, r.code])).toEqual([
      [full, 'InsufficientFreeAddressesInSubnet'],
    ]);
    expect(refusedBy(e)).toEqual({ InsufficientFreeAddressesInSubnet: 1 });
    expect(e.metrics.totalsBy('SubnetFull', 'SubnetId')).toEqual({ [full]: 1 });
    expect(await invariantViolations(e)).toBe('');
  });

  it('in prefix mode takes /28s in another subnet before any single address (InsufficientCidrBlocks)', async () => {
    const {
      env: e,
      full,
      spare,
      node,
    } = await fullSubnetCase({
      mode: 'fragment',
      enis: [{ prefixCount: 1 }],
      claims: 14,
      config: { prefixDelegation: true },
    });

    const report = await manageNodePool(e.deps(), node.instanceArn);

    expect(report.leased).toHaveLength(16);
    const after = (await e.store.getNode(node.instanceArn))!;
    expect(after.enis.map((r) => [r.subnetId, r.prefixes.length, r.addresses.length])).toEqual([
      [full, 1, 0],
      [spare, 1, 0],
    ]);
    // One refused /28 on the fragmented subnet, and no Assign of single addresses anywhere.
    expect(e.sim.admin.counts()['AssignPrivateIpAddresses']).toMatchObject({ ok: 0, errors: 1 });
    expect(after.subnetRefusals?.map((r) => [r.subnetId, r.code])).toEqual([[full, 'InsufficientCidrBlocks']]);
    expect(refusedBy(e)).toEqual({ InsufficientCidrBlocks: 1 });
    expect(await invariantViolations(e)).toBe('');
  });

  it('in prefix mode falls back to single addresses on the same ENI when no subnet has a /28 (prefixFallbackToAddresses)', async () => {
    const { env: e, full, node } = await fragmentedAlone(true);

    const report = await manageNodePool(e.deps(), node.instanceArn);

    // Wanted: high 6 − 2 spare = 4 single addresses, where a /28 would have given 16.
    expect(report.leased).toHaveLength(4);
    expect(report.shortfall).toBe(0);
    const leases = await e.store.listLeases(node.instanceArn);
    const added = leases.filter((l) => report.leased.includes(l.ip));
    expect(added.every((l) => l.prefix === undefined && l.subnetId === full)).toBe(true);
    const after = (await e.store.getNode(node.instanceArn))!;
    expect(after.enis.map((r) => [r.prefixes.length, r.addresses.length])).toEqual([[1, 4]]);
    expect(e.sim.admin.counts()['AssignPrivateIpAddresses']).toMatchObject({ ok: 1, errors: 1 });
    expect(e.sim.admin.counts()['CreateNetworkInterface']).toBeUndefined();
    expect(after.subnetRefusals?.map((r) => r.code)).toEqual(['InsufficientCidrBlocks']);
    expect(await invariantViolations(e)).toBe('');
  });

  it('without the fallback, leases nothing, says which subnet it holds off, and makes no call during the hold', async () => {
    const { env: e, full, node } = await fragmentedAlone(false);

    const first = await manageNodePool(e.deps(), node.instanceArn);
    expect(first).toMatchObject({ leased: [], shortfall: 4, subnetsOnHold: [full] });
    expect(e.sim.admin.counts()['AssignPrivateIpAddresses']).toMatchObject({ ok: 0, errors: 1 });

    e.sim.admin.resetCounts();
    const second = await manageNodePool(e.deps(), node.instanceArn);
    expect(second).toMatchObject({ leased: [], shortfall: 4, subnetsOnHold: [full] });
    expect(calls(e)).toEqual({});
    expect(await invariantViolations(e)).toBe('');
  });

  it('stays within the ENI limit: with every slot taken, no new ENI, and the shortfall is reported', async () => {
    // m5.large: 3 ENIs, the boot ENI and two pod ENIs, both in the subnet that fills.
    const { env: e, node } = await fullSubnetCase({
      mode: 'exhaust',
      enis: [{ ipCount: 2 }, { ipCount: 2 }],
      claims: 3,
    });

    const report = await manageNodePool(e.deps(), node.instanceArn);

    expect(report).toMatchObject({ needed: 5, leased: [], shortfall: 5 });
    expect(e.sim.admin.counts()['AssignPrivateIpAddresses']).toMatchObject({ ok: 0, errors: 1 });
    expect(e.sim.admin.counts()['CreateNetworkInterface']).toBeUndefined();
    expect((await e.store.getNode(node.instanceArn))!.enis).toHaveLength(2);
    expect(await invariantViolations(e)).toBe('');
  });
});

describe('Function: manageNodePool › new ENI refused for a full subnet (issue 25)', () => {
  it('creates it in the next subnet after one refusal, and records where it went and why', async () => {
    const e = await startPoolEnv({ config: { prefixDelegation: true } });
    env = e;
    // The fragmented subnet shows the most free addresses, so the planner puts the new ENI there first.
    const fragmented = e.sim.admin.seedSubnet(e.vpcId, '10.0.32.0/24', 'us-east-1a').subnetId;
    const spare = e.sim.admin.seedSubnet(e.vpcId, '10.0.33.0/25', 'us-east-1a').subnetId;
    e.config = { ...e.config, podSubnetIds: [fragmented, spare] };
    // t3.small: 3 slots per ENI, all taken by the node's /28s, so the top-up needs a new ENI.
    const node = await readyNode(e, {
      instanceType: 't3.small',
      subnetId: spare,
      podSubnetIds: [fragmented, spare],
      enis: [{ prefixCount: 3 }],
    });
    await fillSubnet(fragmented, 'fragment', e.ec2.client);
    for (let i = 0; i < 46; i++) await claimOne(e, node.instanceArn);
    e.sim.admin.resetCounts();

    const report = await manageNodePool(e.deps(), node.instanceArn);

    expect(report.leased).toHaveLength(16);
    expect(e.sim.admin.counts()['CreateNetworkInterface']).toMatchObject({ ok: 1, errors: 1 });
    const after = (await e.store.getNode(node.instanceArn))!;
    const added = after.enis.find((r) => r.deviceIndex === 2)!;
    expect([added.subnetId, added.step, added.prefixes.length]).toEqual([spare, 'LEASED', 1]);
    const [inEc2] = await e.ec2.describeNetworkInterfaces({ eniIds: [added.eniId!] });
    expect(inEc2?.subnetId).toBe(spare);
    expect(after.subnetRefusals?.map((r) => [r.subnetId, r.code])).toEqual([[fragmented, 'InsufficientCidrBlocks']]);
    expect(await invariantViolations(e)).toBe('');
  });
});

describe('Function: manageNodePool › back-off from a full subnet (issue 25)', () => {
  async function exhaustedAlone(deps?: Partial<PoolDeps>) {
    const c = await fullSubnetCase({ mode: 'exhaust', spare: false, enis: [{ ipCount: 4 }], claims: 3 });
    const pass = async () => {
      c.env.sim.admin.resetCounts();
      const report = await manageNodePool(c.env.deps(deps), c.node.instanceArn);
      return { report, calls: calls(c.env) };
    };
    return { ...c, pass };
  }

  it('refuses once, then makes no EC2 call until the hold runs out, then tries once more', async () => {
    const { env: e, full, node, pass } = await exhaustedAlone();

    const first = await pass();
    expect(first.report).toMatchObject({ leased: [], subnetsOnHold: [full] });
    expect(first.report.shortfall).toBeGreaterThan(0);
    expect(first.calls['AssignPrivateIpAddresses']).toBe(1);

    const held = await pass();
    expect(held.report).toMatchObject({ leased: [], subnetsOnHold: [full] });
    expect(held.calls).toEqual({});

    e.clock.advance(DEFAULT_SUBNET_REFUSAL_HOLD_MS - 1);
    expect((await pass()).calls).toEqual({});

    e.clock.advance(2);
    const after = await pass();
    expect(after.calls['AssignPrivateIpAddresses']).toBe(1);
    expect((await pass()).calls).toEqual({});
    // The one refusal per subnet and code is kept, with the latest time.
    const recorded = (await e.store.getNode(node.instanceArn))!.subnetRefusals;
    expect(recorded).toEqual([{ subnetId: full, code: 'InsufficientFreeAddressesInSubnet', atMs: e.clock.nowMs() }]);
    expect(refusedBy(e)).toEqual({ InsufficientFreeAddressesInSubnet: 2 });
  });

  it('plans around a subnet refused within the hold from the first call: /28s elsewhere, no single addresses there', async () => {
    const {
      env: e,
      full,
      spare,
      node,
    } = await fullSubnetCase({
      mode: 'fragment',
      enis: [{ prefixCount: 1 }],
      claims: 14,
      config: { prefixDelegation: true },
    });
    // A pass a moment ago was refused a /28 there (the refusal it recorded is all this pass knows of it).
    const current = (await e.store.getNode(node.instanceArn))!;
    const refusal = { subnetId: full, code: 'InsufficientCidrBlocks', atMs: e.clock.nowMs() - 1 };
    await e.store.updateNode({ ...current, subnetRefusals: [refusal] }, current.version);

    const report = await manageNodePool(e.deps(), node.instanceArn);

    expect(report.leased).toHaveLength(16);
    expect(e.sim.admin.counts()['AssignPrivateIpAddresses']).toBeUndefined();
    const after = (await e.store.getNode(node.instanceArn))!;
    expect(after.enis.map((r) => [r.subnetId, r.prefixes.length, r.addresses.length])).toEqual([
      [full, 1, 0],
      [spare, 1, 0],
    ]);
  });

  it('control: with no hold, every pass sends the refused Assign again (what the hold prevents)', async () => {
    const { pass } = await exhaustedAlone({ subnetRefusalHoldMs: 0 });
    for (let i = 0; i < 3; i++) expect((await pass()).calls['AssignPrivateIpAddresses']).toBe(1);
  });
});
