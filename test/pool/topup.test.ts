import { afterEach, describe, expect, it } from 'vitest';
import { ENI_TAGS } from '../../shared/ec2/tags.js';
import { NoFreeLeaseError } from '../../shared/errors.js';
import { expectedLeases } from '../../shared/lifecycle/pod-eni.js';
import { POOL_OWNER } from '../../shared/pool/new-eni.js';
import { AssignPassBusyError, manageNodePool } from '../../shared/pool/pool-manager.js';
import { DEFAULT_SUBNET_REFUSAL_HOLD_MS } from '../../shared/pool/subnet-holds.js';
import { claimOne, invariantViolations, type PoolEnv, readyNode, startPoolEnv } from './support.js';

let env: PoolEnv | undefined;

afterEach(async () => {
  await env?.close();
  env = undefined;
});

async function ec2Addresses(e: PoolEnv, eniId: string): Promise<string[]> {
  const [eni] = await e.ec2.describeNetworkInterfaces({ eniIds: [eniId] });
  return [...(eni?.secondaryIps ?? [])].sort();
}

describe('Pool: top-up', () => {
  it('assigns addresses on the ENI with room when a claim crosses the low watermark', async () => {
    env = await startPoolEnv();
    const { instanceArn, node } = await readyNode(env, { enis: [{ ipCount: 4 }] });
    const eniId = node.enis[0]!.eniId!;
    await claimOne(env, instanceArn);
    await claimOne(env, instanceArn); // 2 claimable left, under low = 3

    const report = await manageNodePool(env.deps(), instanceArn);

    // min(… high − spare = 6 − 2 …) = 4 more, all on the existing ENI (5 free slots on m5.large).
    expect(report.needed).toBe(4);
    expect(report.leased).toHaveLength(4);
    expect(await env.store.countClaimable(instanceArn, env.clock.nowMs())).toBe(6);
    const inEc2 = await ec2Addresses(env, eniId);
    expect(inEc2).toHaveLength(8);
    const leases = await env.store.listLeases(instanceArn);
    expect(leases.map((l) => l.ip).sort()).toEqual(inEc2);
    const recorded = (await env.store.getNode(instanceArn))!.enis[0]!.addresses;
    expect([...recorded].sort()).toEqual(inEc2);
    expect(env.sim.admin.counts()['AssignPrivateIpAddresses']?.ok).toBe(1);
    expect(await invariantViolations(env)).toBe('');
  });

  it('does nothing inside the band', async () => {
    env = await startPoolEnv();
    const { instanceArn } = await readyNode(env, { enis: [{ ipCount: 6 }] });
    await claimOne(env, instanceArn);
    env.sim.admin.resetCounts();

    const report = await manageNodePool(env.deps(), instanceArn);

    expect(report).toMatchObject({ needed: 0, excess: 0, leased: [], released: [] });
    expect(env.sim.admin.counts()['AssignPrivateIpAddresses']).toBeUndefined();
    expect(env.sim.admin.counts()['UnassignPrivateIpAddresses']).toBeUndefined();
  });

  it('creates, attaches and leases another ENI when the existing ones are full', async () => {
    env = await startPoolEnv();
    const { instanceArn, instanceId } = await readyNode(env, { enis: [{ ipCount: 9 }] }); // m5.large: full
    for (let i = 0; i < 8; i++) await claimOne(env, instanceArn);

    const report = await manageNodePool(env.deps(), instanceArn);

    expect(report.waitingForAttachment).toBe(false);
    expect(report.leased.length).toBeGreaterThanOrEqual(5);
    const node = (await env.store.getNode(instanceArn))!;
    expect(node.enis.map((e) => [e.deviceIndex, e.step])).toEqual([
      [1, 'LEASED'],
      [2, 'LEASED'],
    ]);
    const added = node.enis[1]!;
    const [eni] = await env.ec2.describeNetworkInterfaces({ eniIds: [added.eniId!] });
    expect(eni?.attachment).toMatchObject({
      instanceId,
      deviceIndex: 2,
      status: 'attached',
      deleteOnTermination: true,
    });
    expect(eni?.tags[ENI_TAGS.owner]).toBe(POOL_OWNER);
    expect(eni?.tags[ENI_TAGS.cluster]).toBe(env.config.clusterName);
    const onNew = (await env.store.listLeases(instanceArn)).filter((l) => l.eniId === added.eniId);
    expect(onNew.map((l) => l.ip).sort()).toEqual([...(eni?.secondaryIps ?? [])].sort());
    expect(await env.store.countClaimable(instanceArn, env.clock.nowMs())).toBeGreaterThanOrEqual(
      env.config.warmLowLeases,
    );
    expect(await invariantViolations(env)).toBe('');
  });

  it('resumes a new ENI whose attachment outlasted the pass, without a second ENI', async () => {
    env = await startPoolEnv();
    const { instanceArn } = await readyNode(env, { enis: [{ ipCount: 9 }] });
    for (let i = 0; i < 8; i++) await claimOne(env, instanceArn);
    env.sim.admin.pauseAttachments();

    const first = await manageNodePool(env.deps({ attachWaitMs: 1 }), instanceArn);
    expect(first.waitingForAttachment).toBe(true);
    expect((await env.store.getNode(instanceArn))!.enis[1]?.step).toBe('ATTACHING');
    // A second pass while it is still attaching neither plans another ENI nor leases early.
    const second = await manageNodePool(env.deps({ attachWaitMs: 1 }), instanceArn);
    expect(second.waitingForAttachment).toBe(true);
    expect(env.sim.admin.counts()['CreateNetworkInterface']?.ok).toBe(2); // the fixture's one + this one

    env.sim.admin.resumeAttachments();
    const third = await manageNodePool(env.deps(), instanceArn);
    expect(third.leased.length).toBeGreaterThan(0);
    const node = (await env.store.getNode(instanceArn))!;
    expect(node.enis.filter((e) => e.step === 'LEASED')).toHaveLength(2);
    expect(env.sim.admin.counts()['CreateNetworkInterface']?.ok).toBe(2);
    expect(await invariantViolations(env)).toBe('');
  });

  it('keeps the pool above the low watermark while pods claim faster than it refills', async () => {
    env = await startPoolEnv({ config: { minLeases: 4, warmLowLeases: 6, warmHighLeases: 12 } });
    const { instanceArn } = await readyNode(env, { instanceType: 'c5.4xlarge', enis: [{ ipCount: 12 }] });
    const deps = env.deps();
    const claimed = new Map<string, string>();
    const failures: unknown[] = [];
    const lows: number[] = [];
    for (let round = 0; round < 8; round++) {
      // A burst of 5 ADDs (fewer than the low watermark) racing a pool pass the previous burst triggered.
      const burst = Array.from({ length: 5 }, () =>
        claimOne(env!, instanceArn).then(
          (c) => claimed.set(c.containerId, c.ip),
          (err) => failures.push(err),
        ),
      );
      await Promise.all([...burst, manageNodePool(deps, instanceArn)]);
      // The stream's pass for this burst's claims.
      await manageNodePool(deps, instanceArn);
      lows.push(await env.store.countClaimable(instanceArn, env.clock.nowMs()));
    }
    expect(failures.filter((f) => f instanceof NoFreeLeaseError)).toEqual([]);
    expect(failures).toEqual([]);
    expect(Math.min(...lows)).toBeGreaterThanOrEqual(env.config.warmLowLeases);
    // Every pod holds a distinct address, still CLAIMED by it.
    expect(new Set(claimed.values()).size).toBe(40);
    const leases = await env.store.listLeases(instanceArn);
    for (const [containerId, ip] of claimed) {
      const lease = leases.find((l) => l.ip === ip);
      expect(lease?.state).toBe('CLAIMED');
      expect(lease?.holder?.containerId).toBe(containerId);
    }
    expect(await invariantViolations(env)).toBe('');
  });

  it('leases recorded addresses whose lease write was lost (crash after the node write)', async () => {
    env = await startPoolEnv();
    const { instanceArn } = await readyNode(env, { enis: [{ ipCount: 4 }] });
    await claimOne(env, instanceArn);
    await claimOne(env, instanceArn);
    const store = env.store;
    let failed = false;
    const crashing = new Proxy(store, {
      get(target, prop, receiver) {
        if (prop === 'putLeases' && !failed)
          return async () => {
            failed = true;
            throw new Error('simulated crash before the lease write');
          };
        const value = Reflect.get(target, prop, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });

    await expect(manageNodePool(env.deps({ store: crashing }), instanceArn)).rejects.toThrow(/simulated crash/);
    // EC2 has the addresses and the node item records them, but no lease names them yet.
    expect((await env.store.listLeases(instanceArn)).length).toBe(4);
    expect(await invariantViolations(env)).toMatch(/has no lease/);

    const report = await manageNodePool(env.deps(), instanceArn);

    expect(report.adopted).toBe(4);
    expect(report.needed).toBe(0);
    expect((await env.store.listLeases(instanceArn)).length).toBe(8);
    expect(await invariantViolations(env)).toBe('');
  });

  it('replans from EC2 when the node item undercounts an ENI (addresses assigned but never recorded)', async () => {
    env = await startPoolEnv();
    const { instanceArn, node } = await readyNode(env, { enis: [{ ipCount: 5 }] });
    const eniId = node.enis[0]!.eniId!;
    // A top-up that died between its Assign and its node write: EC2 has 3 more addresses nothing records,
    // so the ENI has 1 free slot where the node item believes it has 4.
    const lost = await env.ec2.assignPrivateIpAddresses(eniId, { ipCount: 3 });
    for (let i = 0; i < 3; i++) await claimOne(env, instanceArn);

    const report = await manageNodePool(env.deps(), instanceArn);

    // The fast path's Assign on the (actually full) ENI is refused; the EC2-based plan adds a second ENI.
    expect(env.sim.admin.counts()['AssignPrivateIpAddresses']?.errors).toBe(1);
    expect(report.leased.length).toBeGreaterThan(0);
    const after = (await env.store.getNode(instanceArn))!;
    expect(after.enis.map((e) => e.step)).toEqual(['LEASED', 'LEASED']);
    expect(await env.store.countClaimable(instanceArn, env.clock.nowMs())).toBeGreaterThanOrEqual(
      env.config.warmLowLeases,
    );
    // The unrecorded addresses are the only disagreement left, and the checker names exactly them.
    const violations = (await invariantViolations(env)).split('\n');
    expect(violations.sort()).toEqual(
      lost.ips.map((ip) => `invariant 5: address ${ip} on ${eniId} has no lease`).sort(),
    );
  });

  it('drops a new ENI EC2 refuses for good (subnet full) and replans once the subnet’s hold runs out', async () => {
    env = await startPoolEnv();
    const { instanceArn } = await readyNode(env, { enis: [{ ipCount: 9 }] });
    for (let i = 0; i < 8; i++) await claimOne(env, instanceArn);
    env.sim.admin.failNext({ action: 'CreateNetworkInterface', code: 'InsufficientFreeAddressesInSubnet', count: 5 });

    const first = await manageNodePool(env.deps(), instanceArn);

    expect(first.leased).toEqual([]);
    const refused = (await env.store.getNode(instanceArn))!;
    expect(refused.enis.map((e) => e.step)).toEqual(['LEASED']);
    // The pool's ENI writer keeps the refusal the create step noted, as the launch's does.
    expect(refused.subnetRefusals?.map((r) => [r.subnetId, r.code])).toEqual([
      [env.subnetId, 'InsufficientFreeAddressesInSubnet'],
    ]);
    expect(env.logs.some((l) => l.includes('EC2 refused a new pod ENI'))).toBe(true);
    expect(await invariantViolations(env)).toBe('');

    env.sim.admin.clearFaults();
    env.sim.admin.resetCounts();
    // The node's only subnet refused it: the passes within the hold leave EC2 alone.
    expect(await manageNodePool(env.deps(), instanceArn)).toMatchObject({ leased: [], subnetsOnHold: [env.subnetId] });
    expect(env.sim.admin.counts()).toEqual({});
    env.clock.advance(DEFAULT_SUBNET_REFUSAL_HOLD_MS);
    const second = await manageNodePool(env.deps(), instanceArn);
    expect(second.leased.length).toBeGreaterThan(0);
    expect((await env.store.getNode(instanceArn))!.enis.map((e) => e.step)).toEqual(['LEASED', 'LEASED']);
    expect(await invariantViolations(env)).toBe('');
  });

  it('moves a new ENI refused for lack of room to another candidate subnet within the pass, as a launch does', async () => {
    env = await startPoolEnv();
    const { instanceArn } = await readyNode(env, { enis: [{ ipCount: 9 }] });
    const other = env.sim.admin.seedSubnet(env.vpcId, '10.0.16.0/20', 'us-east-1a').subnetId;
    env.config = { ...env.config, podSubnetIds: [env.subnetId, other] };
    for (let i = 0; i < 8; i++) await claimOne(env, instanceArn);
    env.sim.admin.failNext({ action: 'CreateNetworkInterface', code: 'InsufficientFreeAddressesInSubnet', count: 1 });

    const report = await manageNodePool(env.deps(), instanceArn);

    expect(report.leased.length).toBeGreaterThan(0);
    const added = (await env.store.getNode(instanceArn))!.enis[1]!;
    expect(added.step).toBe('LEASED');
    expect(env.logs.some((l) => l.includes('subnet out of addresses; ENI moved'))).toBe(true);
    // The refused subnet, recorded: the one the ENI moved away from.
    const { subnetRefusals } = (await env.store.getNode(instanceArn))!;
    const from = [env.subnetId, other].find((id) => id !== added.subnetId);
    expect(subnetRefusals?.map((r) => [r.subnetId, r.code])).toEqual([[from, 'InsufficientFreeAddressesInSubnet']]);
    // The replanned create got a new token, still salted with the planning time (a pool ENI's token).
    expect(added.clientToken).toMatch(/^vlp-/);
    const [eni] = await env.ec2.describeNetworkInterfaces({ eniIds: [added.eniId!] });
    expect(eni?.subnetId).toBe(added.subnetId);
    expect(await invariantViolations(env)).toBe('');
  });

  it('adds one ENI, not two, when two passes top up the same full node at once', async () => {
    env = await startPoolEnv();
    const { instanceArn, instanceId } = await readyNode(env, { enis: [{ ipCount: 9 }] });
    for (let i = 0; i < 8; i++) await claimOne(env, instanceArn);

    const both = await Promise.allSettled([
      manageNodePool(env.deps(), instanceArn),
      manageNodePool(env.deps(), instanceArn),
    ]);
    // A pass that finds the other holding the node's assignment marker is refused (issue 25), to be retried.
    for (const r of both) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(AssignPassBusyError);
    await manageNodePool(env.deps(), instanceArn); // whatever a loser left in progress

    const enis = await env.ec2.describeNetworkInterfaces({ tags: { [ENI_TAGS.instance]: instanceId } });
    expect(enis).toHaveLength(2);
    const node = (await env.store.getNode(instanceArn))!;
    expect(node.enis.map((e) => [e.deviceIndex, e.step])).toEqual([
      [1, 'LEASED'],
      [2, 'LEASED'],
    ]);
    expect(await invariantViolations(env)).toBe('');
  });

  it('keeps the node item’s prefixes in step with EC2 on assign and on release (what adoption and audits read)', async () => {
    env = await startPoolEnv({
      config: { prefixDelegation: true, minLeases: 4, warmLowLeases: 3, warmHighLeases: 16 },
    });
    const { instanceArn, node } = await readyNode(env, { enis: [{ prefixCount: 1 }] });
    const eniId = node.enis[0]!.eniId!;
    for (let i = 0; i < 14; i++) await claimOne(env, instanceArn); // 2 claimable left, under low = 3
    const inStep = async (): Promise<string[]> => {
      const [eni] = await env!.ec2.describeNetworkInterfaces({ eniIds: [eniId] });
      const recorded = (await env!.store.getNode(instanceArn))!;
      expect([...recorded.enis[0]!.prefixes].sort()).toEqual([...(eni?.prefixes ?? [])].sort());
      expect(recorded.enis[0]!.addresses).toEqual([]);
      // The node item alone names exactly the leases that exist (nothing for adoption to re-lease).
      const leases = await env!.store.listLeases(instanceArn);
      expect(
        expectedLeases(recorded, env!.config.maxPods)
          .map((l) => l.ip)
          .sort(),
      ).toEqual(leases.map((l) => l.ip).sort());
      return [...(eni?.prefixes ?? [])];
    };

    const topped = await manageNodePool(env.deps(), instanceArn);

    expect(topped.leased).toHaveLength(16); // one more /28
    expect(await inStep()).toHaveLength(2);

    // Excess: the whole new /28 is idle past the release delay and above the high watermark.
    env.config = { ...env.config, warmLowLeases: 1, warmHighLeases: 2 };
    env.clock.advance(env.config.releaseDelayMs);
    const released = await manageNodePool(env.deps(), instanceArn);

    expect(released.released).toHaveLength(16);
    expect(await inStep()).toHaveLength(1);
    expect(await invariantViolations(env)).toBe('');
  });
});
