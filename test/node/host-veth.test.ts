import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, openSync } from 'node:fs';
import { constants } from 'node:os';
import type { RtNetlinkSocket } from 'netlink/dist/rt/rt.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  addHostFwmarkRule,
  HOST_FWMARK_RULE_PRIORITY,
  mangleRules,
  POD_RETURN_TABLE,
} from '../../node/datapath/connmark.js';
import { hostVethName, podVethName } from '../../node/datapath/host-veth.js';
import { expectedPodMarkRules, podMarkRules } from '../../node/datapath/pod-marks.js';
import {
  inspectPodRouting,
  type PodRoutingSpec,
  ROUTING_STEPS,
  type RoutingStep,
  setupPodRouting,
} from '../../node/datapath/pod-routing.js';
import { listRules } from '../../node/datapath/pod-rules.js';
import { DEFAULT_ROUTE_TABLE_BASE } from '../../node/datapath/route-tables.js';
import { teardownPodRouting } from '../../node/datapath/routing-teardown.js';
import { AF_INET, AF_INET6, loadCreateRtNetlink, RtnlError, socketInNetns } from '../../node/datapath/rtnl.js';
import { UndoStack } from '../../node/datapath/undo.js';
import { silentLogger } from '../../shared/log.js';
import { missing } from '../support/capabilities.js';
import { ip, PrivateHost, ping } from './support/private-host.js';

/**
 * The host veth (unnumbered, like lyft's unnumbered-ptp) against a real kernel, with real pings. The file's main
 * thread lives in a private "host" netns (see l3-routing.test.ts), whose "boot ENI" has 10.79.0.5 and whose
 * "service" 10.96.0.10 is a host-scoped local address standing in for kube-proxy's DNAT target.
 */
const skip = missing('root', 'netns');
const id = randomBytes(3).toString('hex');
const HOST_IP = '10.79.0.5';
const SERVICE_CIDR = '10.96.0.0/16';
const SERVICE_IP = '10.96.0.10';

describe.skipIf(skip)('host veth in a private host netns', () => {
  const hostNs = `vl8v-${id}`;
  const pods: string[] = [];
  let hostNetns: PrivateHost | undefined;
  let host: RtNetlinkSocket;
  let create: Awaited<ReturnType<typeof loadCreateRtNetlink>>;
  let masterIndex = 0;

  beforeAll(async () => {
    hostNetns = PrivateHost.enter(hostNs);
    ip('link', 'add', 'eni1', 'type', 'veth', 'peer', 'name', 'eni1p');
    ip('link', 'add', 'boot0', 'type', 'veth', 'peer', 'name', 'boot0p');
    for (const l of ['eni1', 'eni1p', 'boot0', 'boot0p']) ip('link', 'set', l, 'up');
    ip('addr', 'add', `${HOST_IP}/24`, 'dev', 'boot0');
    ip('addr', 'add', `${SERVICE_IP}/32`, 'dev', 'lo', 'scope', 'host');
    masterIndex = (JSON.parse(ip('-j', 'link', 'show', 'eni1')) as { ifindex: number }[])[0]!.ifindex;
    create = await loadCreateRtNetlink();
    host = create();
  });

  afterAll(() => {
    host?.socket.close();
    hostNetns?.leave(pods);
  });

  function addPod(podIp: string): { name: string; fd: number; socket: RtNetlinkSocket; close(): void } {
    const name = `vl8q-${id}-${pods.length}`;
    ip('netns', 'add', name);
    pods.push(name);
    const tmp = `tmq${pods.length}`;
    ip('link', 'add', 'link', 'eni1', 'name', tmp, 'type', 'macvlan', 'mode', 'bridge');
    ip('link', 'set', tmp, 'netns', name);
    ip('-n', name, 'link', 'set', tmp, 'name', 'eth0');
    ip('-n', name, 'addr', 'add', `${podIp}/24`, 'dev', 'eth0');
    ip('-n', name, 'link', 'set', 'eth0', 'up');
    ip('-n', name, 'link', 'set', 'lo', 'up');
    const fd = openSync(`/var/run/netns/${name}`, 'r');
    const socket = socketInNetns(create, fd);
    return {
      name,
      fd,
      socket,
      close: () => {
        socket.socket.close();
        closeSync(fd);
      },
    };
  }

  const spec = (podIp: string, containerId: string, mode: 'l2' | 'l3' | 'l3s' = 'l2'): PodRoutingSpec => ({
    mode,
    ifName: 'eth0',
    podIp,
    gateway: '10.79.0.1',
    deviceIndex: 1,
    tableBase: DEFAULT_ROUTE_TABLE_BASE,
    masterIndex,
    mtu: 1500,
    hostVeth: { containerId, serviceCidrs: [SERVICE_CIDR] },
  });

  const hostLinks = (): string[] => (JSON.parse(ip('-j', 'link', 'show')) as { ifname: string }[]).map((l) => l.ifname);
  const podLinks = (ns: string): string[] =>
    (JSON.parse(ip('-n', ns, '-j', 'link', 'show')) as { ifname: string }[]).map((l) => l.ifname);
  const hostRouteTo = (podIp: string): string => ip('route', 'show', `${podIp}/32`).trim();

  it('gives the pod /32 routes to the host and the service CIDR, and the host a /32 back; pings both ways', async () => {
    const p = addPod('10.79.0.10');
    const s = spec('10.79.0.10', 'c-veth-1');
    const undo = new UndoStack(silentLogger);
    // Without the veth the pod cannot reach the host (with ipvlan it never could; here: no route at all).
    expect(ping(p.name, HOST_IP)).toBe(false);
    await setupPodRouting({ host, pod: p.socket, podNsFd: p.fd }, s, undo, () => {});
    undo.commit();

    const hostName = hostVethName('c-veth-1', 'eth0');
    expect(hostLinks()).toContain(hostName);
    expect(podLinks(p.name)).toContain(podVethName('eth0'));
    expect(hostRouteTo('10.79.0.10')).toMatch(new RegExp(`dev ${hostName} .*scope link`));
    const podRoutes = ip('-n', p.name, 'route', 'show');
    expect(podRoutes).toMatch(/10\.79\.0\.5 dev vh-eth0 .*scope link src 10\.79\.0\.10/);
    expect(podRoutes).toMatch(/10\.96\.0\.0\/16 via 10\.79\.0\.5 dev vh-eth0 .*src 10\.79\.0\.10/);
    expect(ping(undefined, '10.79.0.10')).toBe(true);
    expect(ping(p.name, HOST_IP)).toBe(true);
    expect(ping(p.name, SERVICE_IP)).toBe(true);

    // NodePort return path: connections from the veth are marked and answered through table 117.
    expect(await podMarkRules(p.fd, 'vh-eth0', AF_INET)).toEqual(expectedPodMarkRules('vh-eth0'));
    expect(await podMarkRules(p.fd, 'vh-eth0', AF_INET6)).toEqual([]);
    expect(ip('-n', p.name, 'rule', 'show')).toMatch(/fwmark 0x80\/0x80 lookup 117/);
    expect(ip('-n', p.name, 'route', 'show', 'table', String(POD_RETURN_TABLE))).toMatch(
      /default via 10\.79\.0\.5 dev vh-eth0/,
    );
    expect(await inspectPodRouting({ host, pod: p.socket, podNsFd: p.fd }, s)).toEqual([]);
    // L2 too gets the node-wide part: service traffic from the veth is masqueraded off the node, the rest dropped.
    expect((await listRules(host)).some((r) => r.priority === HOST_FWMARK_RULE_PRIORITY)).toBe(true);
    const nat = execFileSync('iptables', ['-w', '5', '-t', 'nat', '-S', 'VPC-LEASE-SNAT'], { encoding: 'utf8' });
    expect(nat).toMatch(/! -o vlh\+ -m connmark --mark 0x80\/0x80 -m conntrack --ctstate DNAT -j MASQUERADE/);
    const forward = execFileSync('iptables', ['-w', '5', '-S', 'VPC-LEASE-FORWARD'], { encoding: 'utf8' });
    expect(forward).toMatch(/-i vlh\+ -m conntrack ! --ctstate DNAT -j DROP/);

    await teardownPodRouting(`/var/run/netns/${p.name}`, s);
    expect(hostLinks()).not.toContain(hostName);
    expect(podLinks(p.name)).not.toContain(podVethName('eth0'));
    expect(hostRouteTo('10.79.0.10')).toBe('');
    expect(await podMarkRules(p.fd, 'vh-eth0', AF_INET)).toEqual([]);
    expect(ip('-n', p.name, 'rule', 'show')).not.toMatch(/fwmark/);
    expect(ping(undefined, '10.79.0.10')).toBe(false);
    // Again: DEL is idempotent.
    await expect(teardownPodRouting(`/var/run/netns/${p.name}`, s)).resolves.toBeUndefined();
    p.close();
  });

  it('installs the node-wide NodePort connmark once for L3 pods and keeps it when they go', async () => {
    const a = addPod('10.79.0.20');
    const b = addPod('10.79.0.21');
    for (const [p, podIp] of [
      [a, '10.79.0.20'],
      [b, '10.79.0.21'],
    ] as const) {
      const undo = new UndoStack(silentLogger);
      await setupPodRouting({ host, pod: p.socket, podNsFd: p.fd }, spec(podIp, `c-${podIp}`, 'l3'), undo, () => {});
      undo.commit();
    }
    const fwmarkRules = (await listRules(host)).filter((r) => r.priority === HOST_FWMARK_RULE_PRIORITY);
    expect(fwmarkRules).toEqual([expect.objectContaining({ fwmark: 0x80, table: 254 })]);
    const hostMangle = mangleRules();
    expect(hostMangle.filter((r) => r === '-A PREROUTING -j VPC-LEASE-NODEPORT')).toHaveLength(1);
    expect(hostMangle.filter((r) => r.startsWith('-A VPC-LEASE-NODEPORT'))).toHaveLength(3);
    // The host still reaches an L3 pod through its veth: the pod's `from` rule does not capture host traffic.
    expect(ping(undefined, '10.79.0.20')).toBe(true);
    expect(ping(b.name, HOST_IP)).toBe(true);
    for (const [p, podIp] of [
      [a, '10.79.0.20'],
      [b, '10.79.0.21'],
    ] as const)
      await teardownPodRouting(`/var/run/netns/${p.name}`, spec(podIp, `c-${podIp}`, 'l3'));
    expect((await listRules(host)).filter((r) => r.src?.startsWith('10.79.0.'))).toEqual([]);
    expect((await listRules(host)).filter((r) => r.priority === HOST_FWMARK_RULE_PRIORITY)).toHaveLength(1);
    a.close();
    b.close();
  });

  it('reports a missing veth in CHECK', async () => {
    const p = addPod('10.79.0.30');
    const s = spec('10.79.0.30', 'c-check');
    const undo = new UndoStack(silentLogger);
    await setupPodRouting({ host, pod: p.socket, podNsFd: p.fd }, s, undo, () => {});
    ip('link', 'del', hostVethName('c-check', 'eth0'));
    const problems = await inspectPodRouting({ host, pod: p.socket, podNsFd: p.fd }, s);
    expect(problems).toEqual(
      expect.arrayContaining([
        `host veth ${hostVethName('c-check', 'eth0')} is missing`,
        'pod veth vh-eth0 is missing',
      ]),
    );
    await undo.unwind(new Error('cleanup'));
    expect(await podMarkRules(p.fd, 'vh-eth0', AF_INET)).toEqual([]);
    p.close();
  });

  const vethSteps = ROUTING_STEPS.filter((s) => s !== 'add-rule' && s !== 'add-table-route');
  it.each(vethSteps)('leaves no veth, route, rule or mark when ADD fails after %s', async (step) => {
    const p = addPod('10.79.0.40');
    const s = spec('10.79.0.40', `c-fail-${step}`, 'l3s');
    const undo = new UndoStack(silentLogger);
    const failAt = (at: RoutingStep): void => {
      if (at === step) throw new Error(`injected after ${at}`);
    };
    const err = await setupPodRouting({ host, pod: p.socket, podNsFd: p.fd }, s, undo, failAt).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    await undo.unwind(err);
    expect(hostLinks()).not.toContain(hostVethName(`c-fail-${step}`, 'eth0'));
    expect(podLinks(p.name)).toEqual(expect.not.arrayContaining([podVethName('eth0')]));
    expect(hostRouteTo('10.79.0.40')).toBe('');
    expect((await listRules(host)).filter((r) => r.src === '10.79.0.40')).toEqual([]);
    expect(ip('route', 'show', 'table', '1001')).toBe('');
    expect(ip('-n', p.name, 'rule', 'show')).not.toMatch(/fwmark/);
    expect(await podMarkRules(p.fd, 'vh-eth0', AF_INET)).toEqual([]);
    p.close();
  });

  // Last in the file: it leaves the host rules behind, which would make ensureHostConnmark skip its chains.
  it.each([
    [AF_INET, '-4'],
    [AF_INET6, '-6'],
  ] as const)(
    'adds the host fwmark rule once when two ADDs race (family %i): EEXIST is success',
    async (family, flag) => {
      await addHostFwmarkRule(host, family);
      await addHostFwmarkRule(host, family); // the kernel answers EEXIST to the second CREATE_EXCL
      const rules = ip(flag, 'rule', 'show')
        .split('\n')
        .filter((l) => l.startsWith(`${HOST_FWMARK_RULE_PRIORITY}:`));
      expect(rules).toEqual([`${HOST_FWMARK_RULE_PRIORITY}:\tfrom all fwmark 0x80/0x80 lookup main`]);
    },
  );

  it('passes on any other refusal of the host fwmark rule as an RtnlError', async () => {
    const refusing = { newRule: () => Promise.reject(new RtnlError('refused', constants.errno.EPERM)) };
    const err = await addHostFwmarkRule(refusing as unknown as RtNetlinkSocket, AF_INET6).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RtnlError);
    expect(err).toMatchObject({
      errno: constants.errno.EPERM,
      message: 'failed to add the host IPv6 fwmark rule: EPERM',
    });
  });
});
