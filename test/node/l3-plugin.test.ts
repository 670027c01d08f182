import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hostVethName } from '../../node/datapath/host-veth.js';
import { ROUTING_STEPS } from '../../node/datapath/pod-routing.js';
import { missing } from '../support/capabilities.js';
import { NodeFixture } from './support/node-fixture.js';
import { ip, PrivateHost, ping } from './support/private-host.js';

/**
 * The plugin in L3/L3S with the host veth, driven as a runtime drives it (a process per call, env + stdin), with
 * macvlan standing in for ipvlan. The file's main thread moves into a private "host" netns first, so the
 * fixture's dynalite, IMDS and ENI, every plugin process it spawns, and the node-wide rules the plugin installs
 * all live there, never in this machine's own host namespace.
 */
const skip = missing('root', 'netns');
const id = randomBytes(3).toString('hex');
const TABLE = '1001';
const HOST_IP = '10.77.0.5';

describe.skipIf(skip)('vpc-lease-cni in L3/L3S with the host veth (private host netns)', () => {
  const hostNs = `vl8n-${id}`;
  let host: PrivateHost | undefined;
  let f: NodeFixture;

  beforeAll(async () => {
    host = PrivateHost.enter(hostNs, { ipForward: true });
    ip('link', 'add', 'boot0', 'type', 'veth', 'peer', 'name', 'boot0p');
    ip('addr', 'add', `${HOST_IP}/24`, 'dev', 'boot0');
    ip('link', 'set', 'boot0', 'up');
    ip('link', 'set', 'boot0p', 'up');
    f = await NodeFixture.start();
    await f.seed(32);
  }, 120_000);

  afterAll(async () => {
    await f?.close();
    host?.leave();
  });

  const conf = (mode: string) => f.netconf('1.1.0', { mode, serviceCidrs: ['10.96.0.0/16'] });
  const podIp = (json: Record<string, unknown> | undefined): string =>
    ((json?.['ips'] as { address: string }[] | undefined)?.[0]?.address ?? '').split('/')[0]!;
  /** Everything an attachment may leave in the host namespace (routes and rules as `ip` prints them). */
  const hostState = () => ({
    links: f.hostLinks().filter((l) => l.startsWith('vlh')),
    rules: ip('rule', 'show')
      .split('\n')
      .filter((l) => l.includes('from 10.77.')),
    table: ip('route', 'show', 'table', TABLE).trim(),
    podRoutes: ip('route', 'show')
      .split('\n')
      .filter((l) => l.startsWith('10.77.0.') && !l.includes('/')),
  });
  const empty = { links: [], rules: [], table: '', podRoutes: [] };

  it.each(['l3', 'l3s'])('%s: ADD → CHECK → DEL for two pods on one ENI, with rules, table and veth', async (mode) => {
    const pods = [
      { containerId: `${mode}-a`, netns: f.addNetns() },
      { containerId: `${mode}-b`, netns: f.addNetns() },
    ];
    const adds = await Promise.all(pods.map((p) => f.run('ADD', p, conf(mode))));
    for (const a of adds) expect(a.code, a.stdout).toBe(0);
    const [ipA, ipB] = adds.map((a) => podIp(a.json)) as [string, string];
    const rules = ip('rule', 'show');
    expect(rules).toContain(`from ${ipA} lookup ${TABLE}`);
    expect(rules).toContain(`from ${ipB} lookup ${TABLE}`);
    expect(rules).toMatch(/1024:\s+from all fwmark 0x80\/0x80 lookup main/);
    expect(ip('route', 'show', 'table', TABLE).match(/^default via 10\.77\.0\.1 dev /gm)).toHaveLength(2);
    expect(ip('route', 'get', '192.0.2.9', 'from', ipA, 'iif', 'boot0p')).toContain(
      `dev ${f.masterName} table ${TABLE}`,
    );
    expect(ping(undefined, ipA)).toBe(true);
    expect(ping(pods[1]!.netns, HOST_IP)).toBe(true);
    const check = await f.run('CHECK', pods[0]!, { ...conf(mode), prevResult: adds[0]!.json });
    expect(check.code, check.stdout).toBe(0);

    // CHECK notices a missing rule.
    ip('rule', 'del', 'from', ipA, 'lookup', TABLE);
    const broken = await f.run('CHECK', pods[0]!, { ...conf(mode), prevResult: adds[0]!.json });
    expect(broken.code).toBe(1);
    expect(String(broken.json?.['details'])).toContain(`no rule from ${ipA} lookup ${TABLE}`);

    const dels = await Promise.all(pods.map((p) => f.run('DEL', p, conf(mode))));
    for (const d of dels) expect(d.code, d.stdout).toBe(0);
    expect(hostState()).toEqual(empty);
    for (const p of pods) expect(f.podLinks(p.netns)).toEqual([]);
    for (const p of pods) expect((await f.run('DEL', p, conf(mode))).code).toBe(0);
  });

  it('l3: a repeated ADD re-verifies rule, table route, host veth and link, and rebuilds what is broken', async () => {
    const pod = { containerId: 'readd-l3', netns: f.addNetns() };
    const add = await f.run('ADD', pod, conf('l3'));
    expect(add.code, add.stdout).toBe(0);
    const podAddress = podIp(add.json);
    const veth = hostVethName(pod.containerId, 'eth0');
    const intact = hostState();
    expect(intact.rules).toHaveLength(1);
    const readd = async (): Promise<void> => {
      const again = await f.run('ADD', pod, conf('l3'));
      expect(again.code, again.stdout).toBe(0);
      // The same lease, and the whole attachment as the first ADD left it.
      expect(podIp(again.json)).toBe(podAddress);
      expect(hostState()).toEqual(intact);
      const check = await f.run('CHECK', pod, { ...conf('l3'), prevResult: again.json });
      expect(check.code, check.stdout).toBe(0);
      expect(ping(undefined, podAddress)).toBe(true);
    };
    const breaks: [string, () => void][] = [
      ['the pod rule', () => ip('rule', 'del', 'from', podAddress, 'lookup', TABLE)],
      ['the table route', () => ip('route', 'flush', 'table', TABLE)],
      ['the host veth', () => ip('link', 'del', veth)],
      ['the host route to the pod', () => ip('route', 'del', podAddress, 'dev', veth)],
      ['the pod link', () => ip('-n', pod.netns.split('/').pop()!, 'link', 'del', 'eth0')],
    ];
    for (const [what, breakIt] of breaks) {
      breakIt();
      // The break is real: CHECK sees it before the repeated ADD repairs it.
      const broken = await f.run('CHECK', pod, { ...conf('l3'), prevResult: add.json });
      expect(broken.json, what).toMatchObject({ code: 101 });
      await readd();
    }
    expect((await f.run('DEL', pod, conf('l3'))).code).toBe(0);
    expect(hostState()).toEqual(empty);
  }, 120_000);

  it('DEL without the journal record still removes the rule and the table route (address from the store)', async () => {
    const pod = { containerId: 'no-record', netns: f.addNetns() };
    const add = await f.run('ADD', pod, conf('l3'));
    expect(add.code, add.stdout).toBe(0);
    rmSync(join(f.dataDir, 'attachments', 'no-record~eth0.json'));
    expect(hostState().rules).toHaveLength(1);
    const del = await f.run('DEL', pod, conf('l3'));
    expect(del.code, del.stdout).toBe(0);
    expect(hostState()).toEqual(empty);
  });

  it.each(ROUTING_STEPS.map((s) => [s]))('l3s: an ADD failing after %s leaves nothing behind', async (step) => {
    const pod = { containerId: `fail-${step}`, netns: f.addNetns() };
    const failed = await f.run('ADD', { ...pod, env: { VPC_LEASE_TEST_FAIL_AT: step } }, conf('l3s'));
    expect(failed.code, failed.stdout).toBe(1);
    expect(String(failed.json?.['msg'])).toContain(`injected fault after ${step}`);
    expect(hostState()).toEqual(empty);
    expect(f.hostLinks()).not.toContain(hostVethName(pod.containerId, 'eth0'));
    expect(f.podLinks(pod.netns)).toEqual([]);
    expect(ip('-n', pod.netns.split('/').pop()!, 'rule', 'show')).not.toMatch(/fwmark/);
    expect(await f.store.findByHolder(f.arn, pod.containerId, 'eth0')).toBeUndefined();
  });
});
