import { randomBytes } from 'node:crypto';
import { closeSync, openSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { mangleRules, useIptables } from '../../node/datapath/connmark.js';
import { podVethName } from '../../node/datapath/host-veth.js';
import { missing } from '../support/capabilities.js';
import { type AgentProcess, loggedPids, shimBeside } from './support/agent-process.js';
import { startBarrierAgent } from './support/iptables-barrier.js';
import { NodeFixture } from './support/node-fixture.js';

/**
 * The agent runs independent pods' ADDs side by side, and each pod's connmark rules are in place when its ADD
 * answers. The agent's iptables is a wrapper (VPC_LEASE_IPTABLES_DIR) around the real multi binaries whose pod
 * installs wait at a barrier until `pods` of them have started: it opens only when that many installs are in
 * flight at once, so an agent that runs them one at a time never gets past the first.
 */
const skip = missing('root', 'netns', 'go-plugins');

/** Container ids of this run: a failed run's pods (host veths named after them) never collide with the next's. */
const RUN = randomBytes(3).toString('hex');

describe.skipIf(skip)('the node agent overlaps independent ADDs', () => {
  let f: NodeFixture;
  let agent: AgentProcess | undefined;
  beforeAll(async () => {
    f = await NodeFixture.start();
    await f.seed(16);
  });
  afterEach(async () => {
    useIptables(undefined);
    if (agent && agent.child.exitCode === null) await agent.kill();
    agent = undefined;
  });
  afterAll(async () => {
    await f?.close();
  });

  /** An agent whose iptables is the barrier wrapper; the test reads rules in the backend it chose. */
  const start = async (pods: number): Promise<{ socket: string; gate: string }> => {
    const started = await startBarrierAgent(f, pods);
    agent = started.agent;
    return started;
  };
  const viaShim = (socket: string) => ({ executable: shimBeside(f.cni), env: { VPC_LEASE_AGENT_SOCKET: socket } });
  const podMarks = (netns: string): string[] => {
    const fd = openSync(netns, 'r');
    try {
      return mangleRules(fd);
    } finally {
      closeSync(fd);
    }
  };
  const claimedBy = async (containerId: string) =>
    (await f.store.listLeases(f.arn, { state: 'CLAIMED' })).filter((l) => l.holder?.containerId === containerId);

  it('runs N pods’ installs at once, each on its own lease, each rule present when its ADD returns', async () => {
    const pods = 4;
    const { socket } = await start(pods);
    const conf = f.netconf('1.0.0', { storeTimeoutMs: 60_000 });
    const netnses = Array.from({ length: pods }, () => f.addNetns());
    const results = await Promise.all(
      netnses.map(async (netns, i) => {
        const containerId = `overlap-${RUN}-${i}`;
        const add = await f.run('ADD', { netns, containerId, ...viaShim(socket) }, conf);
        // Read at once, before any other pod's answer: what this ADD promised must already hold.
        return { containerId, netns, add, marks: add.code === 0 ? podMarks(netns) : [] };
      }),
    );
    for (const r of results) {
      expect(r.add.code, r.add.stdout).toBe(0);
      expect(loggedPids(f.logFile, 'added', r.containerId)).toEqual([agent!.pid]);
      expect(r.marks).toEqual([
        `-A PREROUTING -i ${podVethName('eth0')} -j CONNMARK --set-xmark 0x80/0x80`,
        '-A OUTPUT -m connmark --mark 0x80/0x80 -j MARK --set-xmark 0x80/0x80',
      ]);
      expect((await claimedBy(r.containerId)).map((l) => `${l.ip}/24`)).toEqual([
        (r.add.json as { ips: { address: string }[] }).ips[0]!.address,
      ]);
    }
    const ips = results.map((r) => (r.add.json as { ips: { address: string }[] }).ips[0]!.address);
    expect(new Set(ips).size).toBe(pods);
    for (const r of results)
      expect((await f.run('DEL', { netns: r.netns, containerId: r.containerId, ...viaShim(socket) }, conf)).code).toBe(
        0,
      );
  }, 180_000);

  it('fails the ADD when its install fails, and leaves no lease, link or rule behind', async () => {
    const { socket, gate } = await start(1);
    writeFileSync(join(gate, 'fail'), '');
    const netns = f.addNetns();
    const containerId = `overlap-${RUN}-fail`;
    const add = await f.run('ADD', { netns, containerId, ...viaShim(socket) }, f.netconf('1.0.0'));
    expect(add.code, add.stdout).toBe(1);
    expect(add.stdout).toMatch(/injected install failure/);
    expect(await claimedBy(containerId)).toEqual([]);
    expect(f.podLinks(netns)).toEqual([]);
    expect(podMarks(netns)).toEqual([]);
  }, 120_000);
});
