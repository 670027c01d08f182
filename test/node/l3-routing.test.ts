import { randomBytes } from 'node:crypto';
import { closeSync, openSync } from 'node:fs';
import type { RtNetlinkSocket } from 'netlink/dist/rt/rt.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  inspectPodRouting,
  type PodRoutingSpec,
  ROUTING_STEPS,
  type RoutingStep,
  setupPodRouting,
} from '../../node/datapath/pod-routing.js';
import { listRules, POD_RULE_PRIORITY } from '../../node/datapath/pod-rules.js';
import { DEFAULT_ROUTE_TABLE_BASE, podMetric, tableForDevice, tableRoutes } from '../../node/datapath/route-tables.js';
import { teardownPodRouting } from '../../node/datapath/routing-teardown.js';
import { loadCreateRtNetlink, socketInNetns } from '../../node/datapath/rtnl.js';
import { UndoStack } from '../../node/datapath/undo.js';
import { silentLogger } from '../../shared/log.js';
import { missing } from '../support/capabilities.js';
import { ip, PrivateHost } from './support/private-host.js';

/**
 * The L3/L3S half of the datapath against a real kernel: per-ENI tables and per-pod rules. The whole file runs
 * with its main thread inside a private "host" netns (setns through the plugin's own addon), so the rules and
 * tables it makes never touch the machine's real host namespace. Pods are macvlan links (no ipvlan here): the
 * tables and rules live on the host side and do not care about the pod link's kind.
 */
const skip = missing('root', 'netns');
const id = randomBytes(3).toString('hex');
const GATEWAY = '10.78.0.1';
const DEVICE_INDEX = 2;
const TABLE = tableForDevice(DEFAULT_ROUTE_TABLE_BASE, DEVICE_INDEX);

describe('route tables: numbering and metrics', () => {
  it('numbers tables from the base by device index and refuses the boot ENI and reserved ids', () => {
    expect(tableForDevice(1000, 1)).toBe(1001);
    expect(tableForDevice(1000, 15)).toBe(1015);
    expect(() => tableForDevice(1000, 0)).toThrow(/boot ENI/);
    expect(() => tableForDevice(250, 4)).toThrow(/reserved/);
  });

  it('gives every pod address its own metric', () => {
    expect(podMetric('10.78.0.10')).not.toBe(podMetric('10.78.0.11'));
    expect(podMetric('0.0.0.1')).toBe(1);
  });
});

describe.skipIf(skip)('L3/L3S tables and rules in a private host netns', () => {
  const hostNs = `vl8r-${id}`;
  const pods: string[] = [];
  let hostNetns: PrivateHost | undefined;
  let host: RtNetlinkSocket;
  let masterIndex = 0;

  beforeAll(async () => {
    hostNetns = PrivateHost.enter(hostNs, { ipForward: true });
    ip('link', 'add', 'eni1', 'type', 'veth', 'peer', 'name', 'eni1p');
    ip('link', 'set', 'eni1', 'up');
    ip('link', 'set', 'eni1p', 'up');
    masterIndex = (JSON.parse(ip('-j', 'link', 'show', 'eni1')) as { ifindex: number }[])[0]!.ifindex;
    host = (await loadCreateRtNetlink())();
  });

  afterAll(() => {
    host?.socket.close();
    hostNetns?.leave(pods);
  });

  /** A pod netns with a macvlan on the ENI carrying `podIp`/24. */
  function addPod(podIp: string): { name: string; fd: number; socket: RtNetlinkSocket; close(): void } {
    const name = `vl8p-${id}-${pods.length}`;
    ip('netns', 'add', name);
    pods.push(name);
    ip('link', 'add', 'link', 'eni1', 'name', `tmp${pods.length}`, 'type', 'macvlan', 'mode', 'bridge');
    ip('link', 'set', `tmp${pods.length}`, 'netns', name);
    ip('-n', name, 'link', 'set', `tmp${pods.length}`, 'name', 'eth0');
    ip('-n', name, 'addr', 'add', `${podIp}/24`, 'dev', 'eth0');
    ip('-n', name, 'link', 'set', 'eth0', 'up');
    ip('-n', name, 'link', 'set', 'lo', 'up');
    const fd = openSync(`/var/run/netns/${name}`, 'r');
    return { name, fd, socket: socketInNetns(createSync, fd), close: () => closeSync(fd) };
  }
  let createSync: Awaited<ReturnType<typeof loadCreateRtNetlink>>;
  beforeAll(async () => {
    createSync = await loadCreateRtNetlink();
  });

  const spec = (podIp: string, mode: 'l3' | 'l3s' = 'l3'): PodRoutingSpec => ({
    mode,
    ifName: 'eth0',
    podIp,
    gateway: GATEWAY,
    deviceIndex: DEVICE_INDEX,
    tableBase: DEFAULT_ROUTE_TABLE_BASE,
    masterIndex,
    mtu: 1500,
  });
  const rulesFor = async (podIp: string) => (await listRules(host)).filter((r) => r.src === podIp);

  it('adds one rule per pod and one default route per pod in the ENI table, removed with the last pod', async () => {
    const a = addPod('10.78.0.10');
    const b = addPod('10.78.0.11');
    for (const [pod, podIp, mode] of [
      [a, '10.78.0.10', 'l3'],
      [b, '10.78.0.11', 'l3s'],
    ] as const) {
      const undo = new UndoStack(silentLogger);
      await setupPodRouting({ host, pod: pod.socket, podNsFd: pod.fd }, spec(podIp, mode), undo, () => {});
      undo.commit();
    }
    expect(await rulesFor('10.78.0.10')).toEqual([
      expect.objectContaining({ table: TABLE, srcLen: 32, priority: POD_RULE_PRIORITY }),
    ]);
    const routes = await tableRoutes(host, TABLE);
    expect(routes).toHaveLength(2);
    expect(routes.every((r) => r.dst === '0.0.0.0/0' && r.gateway === GATEWAY && r.oif === masterIndex)).toBe(true);
    // What `ip` shows is what the kernel will use: the pod's source address selects the ENI's table.
    expect(ip('route', 'get', '192.0.2.7', 'from', '10.78.0.10', 'iif', 'eni1p')).toMatch(/via 10\.78\.0\.1 dev eni1 /);
    expect(await inspectPodRouting({ host, pod: a.socket, podNsFd: a.fd }, spec('10.78.0.10'))).toEqual([]);

    await teardownPodRouting(`/var/run/netns/${a.name}`, spec('10.78.0.10'));
    expect(await rulesFor('10.78.0.10')).toEqual([]);
    // The other pod's rule and route keep the table alive.
    expect(await rulesFor('10.78.0.11')).toHaveLength(1);
    expect((await tableRoutes(host, TABLE)).map((r) => r.metric)).toEqual([podMetric('10.78.0.11')]);
    expect(await inspectPodRouting({ host, pod: b.socket, podNsFd: b.fd }, spec('10.78.0.11', 'l3s'))).toEqual([]);

    await teardownPodRouting(`/var/run/netns/${b.name}`, spec('10.78.0.11', 'l3s'));
    expect(await tableRoutes(host, TABLE)).toEqual([]);
    expect((await listRules(host)).filter((r) => r.table === TABLE)).toEqual([]);
    // DEL is idempotent: everything is already gone.
    await expect(teardownPodRouting('', spec('10.78.0.11', 'l3s'))).resolves.toBeUndefined();
    for (const p of [a, b]) {
      p.socket.socket.close();
      p.close();
    }
  });

  it('adds nothing in L2 mode', async () => {
    const p = addPod('10.78.0.20');
    const undo = new UndoStack(silentLogger);
    await setupPodRouting(
      { host, pod: p.socket, podNsFd: p.fd },
      { ...spec('10.78.0.20'), mode: 'l2' },
      undo,
      () => {},
    );
    expect(undo.size).toBe(0);
    expect(await rulesFor('10.78.0.20')).toEqual([]);
    expect(await tableRoutes(host, TABLE)).toEqual([]);
    p.socket.socket.close();
    p.close();
  });

  it('reports a missing rule, a missing table route and a stray rule in CHECK', async () => {
    const p = addPod('10.78.0.30');
    const s = spec('10.78.0.30');
    const sockets = { host, pod: p.socket, podNsFd: p.fd };
    const undo = new UndoStack(silentLogger);
    await setupPodRouting(sockets, s, undo, () => {});
    ip('rule', 'del', 'from', '10.78.0.30', 'lookup', String(TABLE));
    ip('rule', 'add', 'from', '10.78.0.30', 'lookup', '4321', 'priority', '1600');
    ip('route', 'del', 'default', 'table', String(TABLE), 'metric', String(podMetric('10.78.0.30')));
    const problems = await inspectPodRouting(sockets, s);
    expect(problems).toEqual([
      `no rule from 10.78.0.30 lookup ${TABLE}`,
      'rules from 10.78.0.30 also point at table(s) 4321',
      `table ${TABLE} has no default route via ${GATEWAY} for 10.78.0.30`,
    ]);
    ip('rule', 'del', 'from', '10.78.0.30', 'lookup', '4321');
    await undo.unwind(new Error('cleanup'));
    expect(await rulesFor('10.78.0.30')).toEqual([]);
    p.socket.socket.close();
    p.close();
  });

  it.each(['add-rule', 'add-table-route'] as const)('leaves no rule or route when ADD fails after %s', async (step) => {
    const p = addPod('10.78.0.40');
    const undo = new UndoStack(silentLogger);
    const failAt = (s: RoutingStep): void => {
      if (s === step) throw new Error(`injected after ${s}`);
    };
    const err = await setupPodRouting({ host, pod: p.socket, podNsFd: p.fd }, spec('10.78.0.40'), undo, failAt).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(Error);
    expect(undo.size).toBeGreaterThan(0);
    await undo.unwind(err);
    expect(await rulesFor('10.78.0.40')).toEqual([]);
    expect(await tableRoutes(host, TABLE)).toEqual([]);
    p.socket.socket.close();
    p.close();
  });

  it('names the steps it can fail at', () => {
    expect(ROUTING_STEPS).toEqual(expect.arrayContaining(['add-rule', 'add-table-route', 'create-veth']));
  });
});
