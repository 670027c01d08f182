import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ipFamilyOf } from '../../shared/ipv6.js';
import { missing } from '../support/capabilities.js';
import { GATEWAY, NodeFixture, V6_GATEWAY } from './support/node-fixture.js';

/**
 * A dual-stack pod (netconf `ipFamily: dual`) driven as the runtime drives the plugin, in real namespaces: one
 * IPv4 and one IPv6 lease on the ENI, both addresses and both default routes on the pod's link, IMDS kept out
 * on both families, CHECK over both, DEL releasing both. macvlan here; real ipvlan with
 * `VPC_LEASE_FIXTURE_LINK_KIND=ipvlan` inside the ipvlan VM.
 */
const skip = missing('root', 'netns', 'go-plugins');

describe.skipIf(skip)('vpc-lease-cni with ipFamily dual, in real network namespaces', () => {
  let f: NodeFixture;
  beforeAll(async () => {
    f = await NodeFixture.start();
    await f.seed(8);
    await f.seedIpv6(8);
  }, 300_000);
  afterAll(async () => {
    await f?.close();
  });

  const conf = () => f.netconf('1.1.0', { ipFamily: 'dual' });
  const claimed = async () => (await f.store.listLeases(f.arn, { state: 'CLAIMED' })).map((l) => l.ip);
  const addresses = (netns: string) =>
    ((f.ipJson(netns, 'addr', 'show', 'eth0')[0]?.['addr_info'] ?? []) as Record<string, unknown>[]).filter(
      (a) => a['scope'] === 'global',
    );

  it('ADD gives both families on one ENI, CHECK verifies both, DEL releases both', async () => {
    const netns = f.addNetns();
    const containerId = 'dual-1';
    const add = await f.run('ADD', { netns, containerId }, conf());
    expect(add.code, add.stdout).toBe(0);
    const result = add.json as { ips: { address: string; gateway: string }[]; routes: { dst: string; gw: string }[] };
    expect(result.ips.map((ip) => ipFamilyOf(ip.address.split('/')[0]!))).toEqual(['ipv4', 'ipv6']);
    expect(result.ips[1]).toMatchObject({ gateway: V6_GATEWAY });
    expect(result.ips[1]!.address).toMatch(/^2600:1f18:77:1:1::[0-9a-f]+\/64$/);
    expect(result.routes).toEqual([
      { dst: '0.0.0.0/0', gw: GATEWAY },
      { dst: '::/0', gw: V6_GATEWAY },
    ]);
    const held = await claimed();
    expect(held.sort()).toEqual(result.ips.map((ip) => ip.address.split('/')[0]).sort());

    // The IPv6 address is usable at once: no DAD, so never tentative.
    const v6 = addresses(netns).find((a) => a['family'] === 'inet6');
    expect(v6).toMatchObject({ local: result.ips[1]!.address.split('/')[0], prefixlen: 64 });
    expect(v6?.['tentative']).toBeUndefined();
    expect(f.ipJson(netns, '-6', 'route', 'show', 'default')).toEqual([
      expect.objectContaining({ gateway: V6_GATEWAY, dev: 'eth0' }),
    ]);
    expect(f.ipJson(netns, '-6', 'route', 'show', 'fd00:ec2::254')).toEqual([
      expect.objectContaining({ type: 'unreachable', dst: 'fd00:ec2::254' }),
    ]);
    expect(f.ipJson(netns, '-4', 'route', 'show', '169.254.169.254')).toEqual([
      expect.objectContaining({ type: 'unreachable' }),
    ]);

    const check = await f.run('CHECK', { netns, containerId }, { ...conf(), prevResult: add.json });
    expect(check.code, check.stdout).toBe(0);
    // The repeated ADD returns the same two addresses (invariant 1, both families).
    const again = await f.run('ADD', { netns, containerId }, conf());
    expect(again.code, again.stdout).toBe(0);
    expect((again.json as typeof result).ips).toEqual(result.ips);

    const del = await f.run('DEL', { netns, containerId }, conf());
    expect(del.code, del.stdout).toBe(0);
    expect(f.podLinks(netns)).toEqual([]);
    for (const ip of held) expect((await f.store.getLease(f.arn, ip))?.state).toBe('COOLDOWN');
  });

  it('CHECK fails when the IPv6 address is gone (the IPv4 half alone is not enough)', async () => {
    const netns = f.addNetns();
    const containerId = 'dual-check';
    const add = await f.run('ADD', { netns, containerId }, conf());
    expect(add.code, add.stdout).toBe(0);
    const v6 = (add.json as { ips: { address: string }[] }).ips[1]!.address;
    execFileSync('ip', ['-n', netns.split('/').pop()!, 'addr', 'del', v6, 'dev', 'eth0']);
    const check = await f.run('CHECK', { netns, containerId }, { ...conf(), prevResult: add.json });
    expect(check.code).toBe(1);
    expect(check.json).toMatchObject({ code: 101 }); // CNI 1.1's checkFailed
    expect(JSON.stringify(check.json)).toContain(v6);
    expect((await f.run('DEL', { netns, containerId }, conf())).code).toBe(0);
  });

  it('a failure between the two claims leaves nothing claimed and no link', async () => {
    const netns = f.addNetns();
    const before = await claimed();
    const add = await f.run(
      'ADD',
      { netns, containerId: 'dual-fault', env: { VPC_LEASE_TEST_FAIL_AT: 'between-claims' } },
      conf(),
    );
    expect(add.code).toBe(1);
    expect(await claimed()).toEqual(before);
    expect(f.podLinks(netns)).toEqual([]);
  });

  it('refuses an IPv6 service CIDR not in RFC 5952 form with code 7 (CHECK compares the kernel’s spelling)', async () => {
    const extra = { ipFamily: 'ipv6', serviceCidrs: ['FD00:96:0::/108'] };
    const add = await f.run('ADD', { netns: f.addNetns(), containerId: 'refused' }, f.netconf('1.1.0', extra));
    expect(add.code).toBe(1);
    expect(add.json).toMatchObject({ code: 7 });
    expect(String(add.json?.['details'])).toContain('write FD00:96:0::/108 as fd00:96::/108');
  });
});
