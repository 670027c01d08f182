import { UnassignIpv6AddressesCommand } from '@aws-sdk/client-ec2';
import { afterEach, describe, expect, it } from 'vitest';
import type { Lease } from '../../shared/domain/lease.js';
import { formatViolations } from '../../shared/invariants/checker.js';
import { ipFamilyOf, ipv6Within, parseIpv6Cidr } from '../../shared/ipv6.js';
import { claimPodLeases } from '../../shared/lease-store/claim-pair.js';
import { detectDrift } from '../../shared/reconcile/drift.js';
import { launchEventBody, terminateEventBody } from './support/events.js';
import { Harness, type HarnessOptions } from './support/harness.js';

const holder = (n: number) => ({ containerId: `c-${n}`, ifName: 'eth0', netns: `/var/run/netns/p${n}` });

async function launched(h: Harness, type: string) {
  const id = h.launchInstance(type);
  await h.drive(launchEventBody(id));
  const arn = h.instanceArnOf(id);
  const node = await h.store.getNode(arn);
  const leases = await h.store.listLeases(arn);
  const enis = await h.ec2.describeNetworkInterfaces({ tags: { 'vpc-lease:instance-id': id } });
  return { id, arn, node, leases, enis };
}

function byFamily(leases: readonly Lease[], family: 'ipv4' | 'ipv6'): Lease[] {
  return leases.filter((l) => ipFamilyOf(l.ip) === family);
}

describe('Function: runLaunch with ipFamily ipv6 and dual (EC2 simulator + dynalite)', () => {
  let h: Harness;
  const start = async (options: HarnessOptions): Promise<void> => {
    h = await Harness.start(options);
  };
  afterEach(async () => {
    await h?.close();
  });

  it('ipv6: one pod ENI with one /80 from the create call, and max-pods FREE leases inside it', async () => {
    await start({ config: { ipFamily: 'ipv6', maxPods: 40 } });
    const { node, leases, enis, id } = await launched(h, 'm5.large');

    expect(node?.phase).toBe('READY');
    expect(node?.ipFamily).toBe('ipv6');
    expect(node?.maxPods).toBe(40);
    expect(enis).toHaveLength(1);
    const [eni] = enis;
    expect(eni?.ipv6Prefixes).toHaveLength(1);
    expect(eni?.secondaryIps).toEqual([]);
    const prefix = eni!.ipv6Prefixes![0]!;
    expect(parseIpv6Cidr(prefix).prefixLength).toBe(80);
    expect(node?.enis[0]?.ipv6Prefixes).toEqual([prefix]);
    // The /80 came with the create: no Assign call at all.
    expect(h.callsByAction()['AssignIpv6Addresses'] ?? 0).toBe(0);
    expect(leases).toHaveLength(40);
    const subnet = (await h.ec2.describeSubnets({ subnetIds: [h.subnetId] }))[0]!;
    for (const l of leases) {
      expect(ipFamilyOf(l.ip)).toBe('ipv6');
      expect(ipv6Within(prefix, l.ip)).toBe(true);
      expect(l).toMatchObject({ state: 'FREE', prefix, eniId: eni!.eniId, mac: eni!.mac, subnetCidr: subnet.ipv6Cidr });
      expect(l.gateway).toBe(`${subnet.ipv6Cidr!.split('::/')[0]}::1`);
    }
    expect(h.autoScaling.resultFor(id)).toEqual(['CONTINUE']);
    expect(formatViolations(await h.check())).toBe('');
  });

  it('ipv6: a redelivered and a duplicated event create no extra ENI and no extra lease', async () => {
    await start({ config: { ipFamily: 'ipv6', maxPods: 20 } });
    const id = h.launchInstance('m5.large');
    const body = launchEventBody(id);
    await Promise.all([h.drive(body), h.drive(body)]);
    await h.drive(body);
    const enis = await h.ec2.describeNetworkInterfaces({ tags: { 'vpc-lease:instance-id': id } });
    expect(enis).toHaveLength(1);
    expect(enis[0]?.ipv6Prefixes).toHaveLength(1);
    expect(await h.store.listLeases(h.instanceArnOf(id))).toHaveLength(20);
    expect(h.autoScaling.resultFor(id)).toEqual(['CONTINUE']);
    expect(formatViolations(await h.check())).toBe('');
  });

  it('ipv6: a crash after every call resumes to the same ENI and leases', async () => {
    await start({ config: { ipFamily: 'ipv6', maxPods: 12 } });
    const clean = await launched(h, 'm5.large');
    const calls = 6;
    for (let crashAt = 1; crashAt <= calls; crashAt += 1) {
      const id = h.launchInstance('m5.large');
      await h.drive(launchEventBody(id), { crashAt, countAll: true });
      const enis = await h.ec2.describeNetworkInterfaces({ tags: { 'vpc-lease:instance-id': id } });
      const leases = await h.store.listLeases(h.instanceArnOf(id));
      expect(enis, `crash at ${crashAt}`).toHaveLength(1);
      expect(leases.map((l) => l.ip).every((ip) => ipv6Within(enis[0]!.ipv6Prefixes![0]!, ip))).toBe(true);
      expect(leases).toHaveLength(clean.leases.length);
    }
    expect(formatViolations(await h.check())).toBe('');
  });

  it('ipv6: refuses a non-Nitro type with a config reason before any EC2 change', async () => {
    await start({ config: { ipFamily: 'ipv6' } });
    const { node, enis, id } = await launched(h, 'c3.2xlarge');
    expect(node?.phase).toBe('FAILED');
    expect(node?.failureReason).toMatch(/^config: ipFamily ipv6 .*\/80.*Nitro.*c3\.2xlarge/);
    expect(enis).toEqual([]);
    expect(h.callsByAction()['CreateNetworkInterface'] ?? 0).toBe(0);
    expect(h.autoScaling.resultFor(id)).toEqual(['ABANDON']);
  });

  it('ipv6: refuses a subnet with no IPv6 CIDR as config, naming the missing IPv6', async () => {
    await start({ config: { ipFamily: 'ipv6' } });
    const vpc = h.sim.admin.seedVpc('10.9.0.0/16');
    // A /64-less subnet: the simulator's CreateSubnet without Ipv6CidrBlock.
    const v4only = await h.ec2.client.send(
      new (await import('@aws-sdk/client-ec2')).CreateSubnetCommand({
        VpcId: vpc.vpcId,
        CidrBlock: '10.9.0.0/24',
        AvailabilityZone: 'us-east-1a',
      }),
    );
    const id = h.launchInstance('m5.large', v4only.Subnet!.SubnetId!);
    await h.drive(launchEventBody(id));
    const node = await h.store.getNode(h.instanceArnOf(id));
    expect(node?.phase).toBe('FAILED');
    expect(node?.failureReason).toMatch(/^config: no candidate subnet with an IPv6 CIDR/);
  });

  it('dual: every IPv4 lease has its IPv6 partner on the same ENI, and pairs are claimed both-or-neither', async () => {
    await start({ config: { ipFamily: 'dual' } });
    const { node, leases, enis, arn } = await launched(h, 'm5.large');

    expect(node?.phase).toBe('READY');
    expect(node?.ipFamily).toBe('dual');
    expect(enis.map((e) => e.ipv6Prefixes?.length)).toEqual([1, 1]);
    const v4 = byFamily(leases, 'ipv4');
    const v6 = byFamily(leases, 'ipv6');
    expect(v4).toHaveLength(16);
    expect(v6).toHaveLength(16);
    const eniOf = new Map(enis.map((e) => [e.eniId, e]));
    for (const l of v6) expect(ipv6Within(eniOf.get(l.eniId)!.ipv6Prefixes![0]!, l.ip)).toBe(true);
    const perEni = (ls: Lease[]) => ls.map((l) => l.eniId).sort();
    expect(perEni(v6)).toEqual(perEni(v4));
    expect(formatViolations(await h.check())).toBe('');

    // Every pair the launch wrote is claimable as a pair.
    const pairs = await Promise.all(
      Array.from({ length: 16 }, (_, n) => claimPodLeases(h.store, arn, holder(n), Date.now(), 'dual')),
    );
    for (const [a, b] of pairs)
      expect([ipFamilyOf(a.ip), ipFamilyOf(b!.ip), b!.eniId]).toEqual(['ipv4', 'ipv6', a.eniId]);
  });

  it('ipv6: a released lease cools down and comes back; terminate removes every IPv6 lease', async () => {
    await start({ config: { ipFamily: 'ipv6', maxPods: 6, minLeases: 2, warmLowLeases: 1, warmHighLeases: 4 } });
    const { arn, id } = await launched(h, 'm5.large');
    const nowMs = Date.now();
    const [lease] = await claimPodLeases(h.store, arn, holder(1), nowMs, 'ipv6');
    expect(ipFamilyOf(lease.ip)).toBe('ipv6');
    const released = await h.store.release(arn, holder(1), nowMs, 30_000, lease.ip);
    expect(released).toMatchObject({ ip: lease.ip, state: 'COOLDOWN', reusableAtMs: nowMs + 30_000 });
    // Cooling down: the other five are claimable, this one is not until reusableAt.
    const others = await Promise.all(
      [2, 3, 4, 5, 6].map((n) => claimPodLeases(h.store, arn, holder(n), nowMs, 'ipv6')),
    );
    expect(others.map(([l]) => l.ip)).not.toContain(lease.ip);
    await expect(claimPodLeases(h.store, arn, holder(7), nowMs, 'ipv6')).rejects.toThrow();
    const [again] = await claimPodLeases(h.store, arn, holder(7), nowMs + 30_000, 'ipv6');
    expect(again.ip).toBe(lease.ip);

    await h.drive(terminateEventBody(id, { token: 'tok-v6' }));
    expect((await h.store.getNode(arn))?.phase).toBe('GONE');
    expect(await h.store.listLeases(arn)).toEqual([]);
  });

  it('ipv6 audit: clean after the launch; the /80 unassigned behind our back is drift and breaks invariant 2', async () => {
    await start({ config: { ipFamily: 'ipv6', maxPods: 4, minLeases: 2, warmLowLeases: 1, warmHighLeases: 4 } });
    const { arn, node, enis, leases, id } = await launched(h, 'm5.large');
    const audit = async () =>
      detectDrift({
        nowMs: Date.now(),
        graceMs: 0,
        nodes: [(await h.store.getNode(arn))!],
        leasesByNode: new Map([[arn, await h.store.listLeases(arn)]]),
        enis: await h.ec2.describeNetworkInterfaces({ tags: { 'vpc-lease:instance-id': id } }),
        instanceStates: new Map([[id, 'running']]),
      });
    expect(node?.phase).toBe('READY');
    expect(await audit()).toEqual([]);
    expect(formatViolations(await h.check())).toBe('');

    const prefix = enis[0]!.ipv6Prefixes![0]!;
    await h.ec2.client.send(
      new UnassignIpv6AddressesCommand({ NetworkInterfaceId: enis[0]!.eniId, Ipv6Prefixes: [prefix] }),
    );
    const drift = await audit();
    expect(drift.map((d) => [d.kind, d.address]).sort()).toEqual(
      leases.map((l) => ['lease-without-address', l.ip]).sort(),
    );
    const violations = (await h.check()).violations.filter((v) => v.invariant === 2);
    expect(violations.map((v) => v.ip).sort()).toEqual(leases.map((l) => l.ip).sort());
  });
});
