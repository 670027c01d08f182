import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, openSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { mangleRules, useIptables } from '../../node/datapath/connmark.js';
import { mangleRules6 } from '../../node/datapath/connmark6.js';
import { podVethName } from '../../node/datapath/host-veth.js';
import { missing } from '../support/capabilities.js';
import { type AgentProcess, loggedPids, shimBeside } from './support/agent-process.js';
import { startBarrierAgent } from './support/iptables-barrier.js';
import { writeLaunchLeases } from './support/launch-leases.js';
import { NodeFixture } from './support/node-fixture.js';
import { PrivateHost } from './support/private-host.js';

/**
 * agent-overlap.test.ts for the IPv6 marks: an `ipv6` or `dual` pod's ip6tables-restore runs in the background
 * like the IPv4 one (the barrier opens only when every pod's installs are in flight at once), its rules are there
 * when the ADD answers, and an IPv6 install that fails fails the ADD and leaves nothing. The file's thread moves
 * into a private "host" netns first (as l3-plugin.test.ts), so the node-wide rules and the IPv6-only pods' IPv4
 * egress rules never touch this machine's own tables.
 */
const skip = missing('root', 'netns', 'go-plugins');
const RUN = randomBytes(3).toString('hex');
/**
 * The barrier's wait: an IPv6-only pod's first ADD also makes the node-wide chains (synchronous iptables runs that
 * hold the agent's other calls), so the last pod can reach its install long after the first under load.
 */
const BARRIER_WAIT_S = 60;
const HOST_IP = '10.77.0.5';
const MARKS = [
  `-A PREROUTING -i ${podVethName('eth0')} -j CONNMARK --set-xmark 0x80/0x80`,
  '-A OUTPUT -m connmark --mark 0x80/0x80 -j MARK --set-xmark 0x80/0x80',
];

function ip(...args: string[]): string {
  return execFileSync('ip', args, { encoding: 'utf8' });
}

describe.skipIf(skip)('the node agent installs IPv6 pod marks in the background (private host netns)', () => {
  let host: { leave(): void } | undefined;
  let f: NodeFixture;
  let agent: AgentProcess | undefined;

  beforeAll(async () => {
    host = PrivateHost.enter(`vl6o-${RUN}`);
    ip('link', 'add', 'boot0', 'type', 'veth', 'peer', 'name', 'boot0p');
    ip('addr', 'add', `${HOST_IP}/24`, 'dev', 'boot0');
    ip('link', 'set', 'boot0', 'up');
    f = await NodeFixture.start();
    // Dual leases: a dual pod takes a pair, an IPv6-only pod one of the IPv6 halves.
    const node = { instanceArn: f.arn, instanceId: f.imds.instanceId, eniId: f.eniId, mac: f.masterMac };
    await writeLaunchLeases(f.store, node, 'dual', 12);
  }, 120_000);
  afterEach(async () => {
    useIptables(undefined);
    if (agent && agent.child.exitCode === null) await agent.kill();
    agent = undefined;
  });
  afterAll(async () => {
    await f?.close();
    host?.leave();
  });

  const start = async (installs: number) => {
    const started = await startBarrierAgent(f, installs, BARRIER_WAIT_S);
    agent = started.agent;
    return started;
  };
  const viaShim = (socket: string) => ({ executable: shimBeside(f.cni), env: { VPC_LEASE_AGENT_SOCKET: socket } });
  const conf = (ipFamily: string) => f.netconf('1.0.0', { ipFamily, storeTimeoutMs: 60_000 });
  const marksIn = (netns: string) => {
    const fd = openSync(netns, 'r');
    try {
      return { v4: mangleRules(fd), v6: mangleRules6(fd) };
    } finally {
      closeSync(fd);
    }
  };
  const addresses = (add: { json: Record<string, unknown> | undefined }) =>
    ((add.json?.['ips'] ?? []) as { address: string }[]).map((a) => a.address.split('/')[0]!);
  const claimedBy = async (containerId: string) =>
    (await f.store.listLeases(f.arn, { state: 'CLAIMED' })).filter((l) => l.holder?.containerId === containerId);

  /** `pods` ADDs of `family` at once through a barrier of `installs`; each pod's marks read as its ADD answers. */
  const overlap = async (family: string, pods: number, installs: number) => {
    const { socket } = await start(installs);
    const results = await Promise.all(
      Array.from({ length: pods }, async (_, i) => {
        const netns = f.addNetns();
        const containerId = `ov6-${RUN}-${family}-${i}`;
        const add = await f.run('ADD', { netns, containerId, ...viaShim(socket) }, conf(family));
        return { containerId, netns, add, marks: add.code === 0 ? marksIn(netns) : undefined };
      }),
    );
    for (const r of results) {
      expect(r.add.code, r.add.stdout).toBe(0);
      expect(loggedPids(f.logFile, 'added', r.containerId)).toEqual([agent!.pid]);
      expect(r.marks?.v6).toEqual(MARKS);
      expect(r.marks?.v4).toEqual(family === 'dual' ? MARKS : []);
      expect((await claimedBy(r.containerId)).map((l) => l.ip).sort()).toEqual(addresses(r.add).sort());
    }
    expect(new Set(results.flatMap((r) => addresses(r.add))).size).toBe(pods * (family === 'dual' ? 2 : 1));
    for (const r of results) {
      const del = await f.run('DEL', { netns: r.netns, containerId: r.containerId, ...viaShim(socket) }, conf(family));
      expect(del.code, del.stdout).toBe(0);
      expect(marksIn(r.netns)).toEqual({ v4: [], v6: [] });
    }
  };

  it('runs N IPv6 pods’ ip6tables installs at once, each rule present when its ADD returns', async () => {
    await overlap('ipv6', 3, 3);
  }, 180_000);

  it('runs two dual pods’ four installs (IPv4 and IPv6) at once', async () => {
    await overlap('dual', 2, 4);
  }, 180_000);

  it('fails a dual ADD whose IPv6 install fails, and leaves no lease, link, rule or egress address', async () => {
    const { socket, gate } = await start(1);
    writeFileSync(join(gate, 'fail-ip6tables-restore'), '');
    for (const family of ['dual', 'ipv6']) {
      const netns = f.addNetns();
      const containerId = `ov6-${RUN}-fail-${family}`;
      const add = await f.run('ADD', { netns, containerId, ...viaShim(socket) }, conf(family));
      expect(add.code, add.stdout).toBe(1);
      expect(add.stdout).toMatch(/failed to install the pod IPv6 connmark rules: injected install failure/);
      expect(await claimedBy(containerId)).toEqual([]);
      expect(f.podLinks(netns)).toEqual([]);
      // The dual pod's IPv4 install succeeded: the undo removed its rules too.
      expect(marksIn(netns)).toEqual({ v4: [], v6: [] });
    }
    expect(readdirSync(join(f.dataDir, 'egress4'))).toEqual([]);
  }, 120_000);
});
