import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EGRESS_CHAIN, EGRESS4_CIDR } from '../../node/datapath/egress4.js';
import { hostVethName } from '../../node/datapath/host-veth.js';
import { EGRESS_STEPS, ROUTING_STEPS } from '../../node/datapath/pod-routing.js';
import { missing } from '../support/capabilities.js';
import { NodeFixture, V6_GATEWAY } from './support/node-fixture.js';
import { ip, PrivateHost, ping } from './support/private-host.js';

/**
 * IPv6 pods in L3/L3S and over the host veth, and the IPv4 egress of IPv6-only pods, driven as a runtime drives
 * the plugin (macvlan standing in for ipvlan: the tables, rules, veth and iptables are the host's either way).
 * As in l3-plugin.test.ts the file's thread moves into a private "host" netns first, so the plugin's node-wide
 * rules never touch this machine's own. boot0's peer sits in netns "outside" (10.77.0.1): the world the egress
 * reaches, whose ICMP counters show what arrived there.
 */
const skip = missing('root', 'netns');
const id = randomBytes(3).toString('hex');
const TABLE = '1001';
const HOST_IP = '10.77.0.5';
const OUTSIDE_IP = '10.77.0.1';
const HOST_IP6 = '2600:1f18:77:0::5';
const SERVICE6 = 'fd00:96::/108';

function iptables(...args: string[]): string {
  return execFileSync('iptables', ['-w', '5', ...args], { encoding: 'utf8' });
}

/** A table's routes; empty while the kernel has no such table. */
function tableText(family: '-4' | '-6'): string {
  try {
    return ip(family, 'route', 'show', 'table', TABLE);
  } catch {
    return '';
  }
}

describe.skipIf(skip)('vpc-lease-cni with IPv6 in L3/L3S, the host veth and IPv4 egress (private host netns)', () => {
  const hostNs = `vl9n-${id}`;
  const outsideNs = `vl9o-${id}`;
  let host: PrivateHost | undefined;
  let f: NodeFixture;

  beforeAll(async () => {
    ip('netns', 'add', outsideNs);
    host = PrivateHost.enter(hostNs, { ipForward: true });
    ip('link', 'add', 'boot0', 'type', 'veth', 'peer', 'name', 'boot0p', 'netns', outsideNs);
    ip('addr', 'add', `${HOST_IP}/24`, 'dev', 'boot0');
    ip('addr', 'add', `${HOST_IP6}/64`, 'dev', 'boot0', 'nodad');
    ip('link', 'set', 'boot0', 'up');
    ip('-n', outsideNs, 'addr', 'add', `${OUTSIDE_IP}/24`, 'dev', 'boot0p');
    ip('-n', outsideNs, 'link', 'set', 'boot0p', 'up');
    f = await NodeFixture.start();
    await f.seed(16);
    await f.seedIpv6(32);
  }, 120_000);

  afterAll(async () => {
    await f?.close();
    host?.leave([outsideNs]);
  });

  const conf = (ipFamily: string, mode: string) =>
    f.netconf('1.1.0', { ipFamily, mode, serviceCidrs: ['10.96.0.0/16', SERVICE6] });
  const ips = (json: Record<string, unknown> | undefined): string[] =>
    ((json?.['ips'] as { address: string }[] | undefined) ?? []).map((a) => a.address.split('/')[0]!);
  const lines = (text: string, needle: string) => text.split('\n').filter((l) => l.includes(needle));
  const egressDir = () => join(f.dataDir, 'egress4');
  const egressFiles = (): string[] => {
    try {
      return readdirSync(egressDir()).sort();
    } catch {
      return [];
    }
  };
  /** Everything an attachment may leave on the host, both families. */
  const hostState = () => ({
    links: f.hostLinks().filter((l) => l.startsWith('vlh')),
    rules: [...lines(ip('rule', 'show'), 'from 10.77.'), ...lines(ip('-6', 'rule', 'show'), 'from 2600:')],
    table: (tableText('-4') + tableText('-6')).trim(),
    hostRoutes: [...lines(ip('route', 'show'), 'vlh'), ...lines(ip('-6', 'route', 'show'), 'vlh')],
    egressRules: lines(ip('rule', 'show'), ' iif vlh'),
    egressFiles: egressFiles(),
  });
  const empty = { links: [], rules: [], table: '', hostRoutes: [], egressRules: [], egressFiles: [] };
  const outsideEchos = (): number => {
    const snmp = execFileSync('ip', ['netns', 'exec', outsideNs, 'cat', '/proc/net/snmp'], { encoding: 'utf8' });
    const [names, values] = snmp.split('\n').filter((l) => l.startsWith('Icmp:'));
    const at = names!.split(/\s+/).indexOf('InEchos');
    return Number(values!.split(/\s+/)[at]);
  };

  it('ipv6 in l3: rule and table route per family, the host veth in IPv6, IPv4 egress through the host', async () => {
    const pod = { containerId: 'v6-l3', netns: f.addNetns() };
    const add = await f.run('ADD', pod, conf('ipv6', 'l3'));
    expect(add.code, add.stdout).toBe(0);
    const [v6] = ips(add.json) as [string];
    expect(v6).toMatch(/^2600:1f18:77:1:1::/);
    expect(ip('-6', 'rule', 'show')).toMatch(new RegExp(`1536:\\s+from ${v6} lookup ${TABLE}`));
    expect(ip('-6', 'route', 'show', 'table', TABLE)).toMatch(
      new RegExp(`default via ${V6_GATEWAY} dev ${f.masterName} .*onlink`),
    );
    expect(ip('-6', 'route', 'get', '2600:1f18:99::9', 'from', v6, 'iif', 'boot0')).toContain(`table ${TABLE}`);
    // The host veth in IPv6: the host reaches the pod and the pod the host and an IPv6 service route.
    const veth = hostVethName(pod.containerId, 'eth0');
    expect(ip('-6', 'route', 'show', `${v6}/128`)).toContain(`via fe80::2 dev ${veth}`);
    const podRoutes6 = ip('-n', pod.netns.split('/').pop()!, '-6', 'route', 'show');
    expect(podRoutes6).toMatch(new RegExp(`${SERVICE6.replace('/', '\\/')} via fe80::1 dev vh-eth0 .*src ${v6}`));
    expect(ping(undefined, v6)).toBe(true);
    expect(ping(pod.netns, HOST_IP6)).toBe(true);
    // NodePort return path in IPv6.
    expect(ip('-n', pod.netns.split('/').pop()!, '-6', 'rule', 'show')).toMatch(/fwmark 0x80\/0x80 lookup 117/);
    expect(ip('-6', 'rule', 'show')).toMatch(/1024:\s+from all fwmark 0x80\/0x80 lookup main/);
    // IPv4 egress: a link-local address, the default route via the host, a rule routing it from its veth only.
    const [egress] = egressFiles() as [string];
    expect(egress.startsWith(EGRESS4_CIDR.split('.').slice(0, 2).join('.'))).toBe(true);
    const podRoutes4 = ip('-n', pod.netns.split('/').pop()!, 'route', 'show');
    expect(podRoutes4).toMatch(new RegExp(`default via ${HOST_IP} dev vh-eth0 .*src ${egress}`));
    expect(podRoutes4).toMatch(/unreachable 169\.254\.169\.254/);
    expect(lines(iptables('-t', 'nat', '-S', EGRESS_CHAIN), '-A ')).toEqual([
      `-A ${EGRESS_CHAIN} -s ${EGRESS4_CIDR} ! -d 224.0.0.0/4 ! -o vlh+ -j MASQUERADE`,
    ]);
    expect(lines(ip('rule', 'show'), ' iif vlh')).toEqual([`1000:\tfrom ${egress} iif ${veth} lookup main`]);
    const before = outsideEchos();
    expect(ping(pod.netns, OUTSIDE_IP)).toBe(true);
    expect(outsideEchos()).toBe(before + 1);
    const check = await f.run('CHECK', pod, { ...conf('ipv6', 'l3'), prevResult: add.json });
    expect(check.code, check.stdout).toBe(0);

    // CHECK notices a missing IPv6 rule and a missing egress rule.
    ip('-6', 'rule', 'del', 'from', v6, 'lookup', TABLE);
    ip('rule', 'del', 'pref', '1000', 'from', egress, 'iif', veth);
    const broken = await f.run('CHECK', pod, { ...conf('ipv6', 'l3'), prevResult: add.json });
    expect(broken.json).toMatchObject({ code: 101 });
    expect(String(broken.json?.['details'])).toContain(`no rule from ${v6} lookup ${TABLE}`);
    expect(String(broken.json?.['details'])).toContain(
      `does not route vh-eth0's egress address ${egress} from its veth`,
    );

    const del = await f.run('DEL', pod, conf('ipv6', 'l3'));
    expect(del.code, del.stdout).toBe(0);
    expect(hostState()).toEqual(empty);
    expect((await f.run('DEL', pod, conf('ipv6', 'l3'))).code).toBe(0);
  });

  it('egress is accepted and masqueraded only from the pod’s own address on its own veth', async () => {
    const a = { containerId: 'spoof-a', netns: f.addNetns() };
    const b = { containerId: 'spoof-b', netns: f.addNetns() };
    for (const p of [a, b]) expect((await f.run('ADD', p, conf('ipv6', 'l2'))).code).toBe(0);
    const addressOf = (containerId: string): string =>
      ip('-n', (containerId === 'spoof-a' ? a : b).netns.split('/').pop()!, '-4', '-o', 'addr', 'show', 'vh-eth0')
        .split(/\s+/)
        .find((w) => w.startsWith('169.254.'))!
        .split('/')[0]!;
    const bAddress = addressOf('spoof-b');
    // Pod A sends from pod B's egress address through its own veth.
    ip('-n', a.netns.split('/').pop()!, 'addr', 'add', `${bAddress}/32`, 'dev', 'vh-eth0');
    const spoof = (): number => {
      const before = outsideEchos();
      ping(a.netns, OUTSIDE_IP, '-I', bAddress);
      return outsideEchos() - before;
    };
    expect(spoof()).toBe(0);
    expect(ping(b.netns, OUTSIDE_IP)).toBe(true);
    // Negative control: a rule keyed by the source alone (no veth) lets the forged packet out.
    ip('rule', 'add', 'pref', '999', 'from', bAddress, 'lookup', 'main');
    expect(spoof()).toBe(1);
    ip('rule', 'del', 'pref', '999', 'from', bAddress, 'lookup', 'main');
    for (const p of [a, b]) expect((await f.run('DEL', p, conf('ipv6', 'l2'))).code).toBe(0);
    expect(hostState()).toEqual(empty);
  });

  it('dual in l3s: a rule and a table route for each address; CHECK and DEL cover both', async () => {
    const pod = { containerId: 'dual-l3s', netns: f.addNetns() };
    const add = await f.run('ADD', pod, conf('dual', 'l3s'));
    expect(add.code, add.stdout).toBe(0);
    const [v4, v6] = ips(add.json) as [string, string];
    expect(ip('rule', 'show')).toContain(`from ${v4} lookup ${TABLE}`);
    expect(ip('-6', 'rule', 'show')).toContain(`from ${v6} lookup ${TABLE}`);
    expect(ip('route', 'show', 'table', TABLE)).toMatch(/^default via 10\.77\.0\.1 dev /m);
    expect(ip('-6', 'route', 'show', 'table', TABLE)).toMatch(new RegExp(`^default via ${V6_GATEWAY} dev `, 'm'));
    expect(ping(undefined, v4)).toBe(true);
    expect(ping(undefined, v6)).toBe(true);
    // A dual pod leaves by its own IPv4 address: no egress address.
    expect(egressFiles()).toEqual([]);
    const check = await f.run('CHECK', pod, { ...conf('dual', 'l3s'), prevResult: add.json });
    expect(check.code, check.stdout).toBe(0);
    ip('-6', 'route', 'del', `${v6}/128`, 'dev', hostVethName(pod.containerId, 'eth0'));
    const broken = await f.run('CHECK', pod, { ...conf('dual', 'l3s'), prevResult: add.json });
    expect(String(broken.json?.['details'])).toContain(`the host has no route to ${v6}`);
    expect((await f.run('DEL', pod, conf('dual', 'l3s'))).code).toBe(0);
    expect(hostState()).toEqual(empty);
  });

  it.each([...ROUTING_STEPS, ...EGRESS_STEPS].map((s) => [s]))(
    'ipv6 in l3s: an ADD failing after %s leaves nothing behind',
    async (step) => {
      const pod = { containerId: `v6-fail-${step}`, netns: f.addNetns() };
      const failed = await f.run('ADD', { ...pod, env: { VPC_LEASE_TEST_FAIL_AT: step } }, conf('ipv6', 'l3s'));
      expect(failed.code, failed.stdout).toBe(1);
      expect(String(failed.json?.['msg'])).toContain(`injected fault after ${step}`);
      expect(hostState()).toEqual(empty);
      expect(f.podLinks(pod.netns)).toEqual([]);
      expect(ip('-n', pod.netns.split('/').pop()!, '-6', 'rule', 'show')).not.toMatch(/fwmark/);
      expect(await f.store.findByHolder(f.arn, pod.containerId, 'eth0')).toBeUndefined();
    },
  );
});
