import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdtempSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { podVethName } from '../../node/datapath/host-veth.js';
import { expectedPodMarkRules, podMarkRules } from '../../node/datapath/pod-marks.js';
import { AF_INET, AF_INET6 } from '../../node/datapath/rtnl.js';
import { missing } from '../support/capabilities.js';
import { type AgentProcess, loggedPids, shimBeside, startAgent } from './support/agent-process.js';
import { writeLaunchLeases } from './support/launch-leases.js';
import { NodeFixture } from './support/node-fixture.js';
import { PrivateHost } from './support/private-host.js';
import { traceSpawns } from './support/spawn-tracer.js';

/**
 * No process per pod: once the node-wide rules are in, the agent's ADDs and DELs start no process, in every
 * family, with pods served side by side, and each pod's marks (nf_tables over netlink) are there when its ADD
 * answers. strace counts every process the agent starts, whatever the program (spawn-tracer.ts); the control shows
 * the count moves when the ADD path has to run iptables again. The file's thread moves into a private "host" netns
 * first, so the node-wide rules never touch this machine's own tables.
 */
const skip = missing('root', 'netns', 'go-plugins', 'strace');
const RUN = randomBytes(3).toString('hex');
const HOST_IP = '10.77.0.5';
const PODS = 3;

function ip(...args: string[]): string {
  return execFileSync('ip', args, { encoding: 'utf8' });
}

describe.skipIf(skip)('the node agent forks no process per pod (private host netns)', () => {
  let host: { leave(): void } | undefined;
  let f: NodeFixture;
  let agent: AgentProcess;
  let socket: string;
  let root: string;

  beforeAll(async () => {
    host = PrivateHost.enter(`vl6s-${RUN}`);
    ip('link', 'add', 'boot0', 'type', 'veth', 'peer', 'name', 'boot0p');
    ip('addr', 'add', `${HOST_IP}/24`, 'dev', 'boot0');
    ip('link', 'set', 'boot0', 'up');
    f = await NodeFixture.start();
    await f.seed(8);
    root = mkdtempSync(join(f.dir, 'spawns-'));
    socket = join(root, 'run', 'agent.sock');
    agent = await startAgent(f.cni, socket, f.baseEnv());
  }, 120_000);
  afterAll(async () => {
    if (agent && agent.child.exitCode === null) await agent.kill();
    await f?.close();
    host?.leave();
  });

  const viaShim = () => ({ executable: shimBeside(f.cni), env: { VPC_LEASE_AGENT_SOCKET: socket } });
  const conf = (ipFamily: string) =>
    f.netconf('1.0.0', { ...(ipFamily === 'ipv4' ? {} : { ipFamily }), storeTimeoutMs: 60_000 });
  const marksIn = async (netns: string) => {
    const fd = openSync(netns, 'r');
    try {
      const name = podVethName('eth0');
      return { v4: await podMarkRules(fd, name, AF_INET), v6: await podMarkRules(fd, name, AF_INET6) };
    } finally {
      closeSync(fd);
    }
  };
  const marks = expectedPodMarkRules(podVethName('eth0'));

  /** One pod's ADD then DEL through the agent (never the fallback, which would run the host's own iptables). */
  const addDel = async (family: string, containerId: string) => {
    const netns = f.addNetns();
    const add = await f.run('ADD', { netns, containerId, ...viaShim() }, conf(family));
    expect(add.code, add.stdout).toBe(0);
    expect(loggedPids(f.logFile, 'added', containerId)).toEqual([agent.pid]);
    const del = await f.run('DEL', { netns, containerId, ...viaShim() }, conf(family));
    expect(del.code, del.stdout).toBe(0);
  };

  const trace = () => traceSpawns(agent.pid, join(root, `strace-${randomBytes(3).toString('hex')}.log`));

  it('control: the count moves when an ADD has to run iptables (the node-wide rules gone)', async () => {
    await addDel('ipv4', `sp-${RUN}-ctl-warm`);
    const spawns = await trace();
    ip('rule', 'del', 'pref', '1024', 'fwmark', '0x80/0x80', 'lookup', 'main');
    await addDel('ipv4', `sp-${RUN}-ctl`);
    expect(await spawns.stop()).toEqual(expect.arrayContaining([expect.stringMatching(/iptables-restore/)]));
  }, 120_000);

  it.each(['ipv4', 'dual', 'ipv6'])(
    '%s: concurrent ADDs and their DELs fork nothing',
    async (family) => {
      // IPv4 pods first, on IPv4 leases; then dual leases: a dual pod takes a pair, an IPv6-only pod one half.
      if (family === 'dual') {
        const node = { instanceArn: f.arn, instanceId: f.imds.instanceId, eniId: f.eniId, mac: f.masterMac };
        await writeLaunchLeases(f.store, node, 'dual', 12);
      }
      // The family's first pod may install the node-wide rules: the only runs the agent makes.
      await addDel(family, `sp-${RUN}-${family}-warm`);
      const spawns = await trace();
      const results = await Promise.all(
        Array.from({ length: PODS }, async (_, i) => {
          const netns = f.addNetns();
          const containerId = `sp-${RUN}-${family}-${i}`;
          const add = await f.run('ADD', { netns, containerId, ...viaShim() }, conf(family));
          // Read at once, before any other pod's answer: what this ADD promised must already hold.
          return { containerId, netns, add, marks: add.code === 0 ? await marksIn(netns) : undefined };
        }),
      );
      for (const r of results) {
        expect(r.add.code, r.add.stdout).toBe(0);
        expect(loggedPids(f.logFile, 'added', r.containerId)).toEqual([agent.pid]);
        expect(r.marks).toEqual({ v4: family === 'ipv6' ? [] : marks, v6: family === 'ipv4' ? [] : marks });
      }
      for (const r of results) {
        const del = await f.run('DEL', { netns: r.netns, containerId: r.containerId, ...viaShim() }, conf(family));
        expect(del.code, del.stdout).toBe(0);
        expect(await marksIn(r.netns)).toEqual({ v4: [], v6: [] });
      }
      expect(await spawns.stop()).toEqual([]);
    },
    180_000,
  );
});
