import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { missing } from '../support/capabilities.js';
import { type AgentProcess, loggedPids, shimBeside, startAgent } from './support/agent-process.js';
import { writeLaunchLeases } from './support/launch-leases.js';
import { NodeFixture } from './support/node-fixture.js';
import { PrivateHost } from './support/private-host.js';

/**
 * agent-safety.test.ts's "an ADD the agent was killed in is finished by the plugin the shim falls back to", for
 * `ipv6` and `dual` pods: the agent hangs right after a step (VPC_LEASE_TEST_HANG_AT) and is SIGKILLed there, the
 * shim re-runs the ADD, and the pod ends with the leases claimed before the break — one per family, each address
 * once on the link, one IPv4 egress address for an IPv6-only pod — and DEL returns all of it. In a private host
 * netns (l3-plugin.test.ts), so the host veth's node-wide rules stay out of this machine's tables.
 */
const skip = missing('root', 'netns', 'go-plugins');
const RUN = randomBytes(3).toString('hex');

/** The breaks: after the claim(s), between a dual pod's two claims, after the link, its addresses, its routes. */
const CASES: [family: 'ipv6' | 'dual', step: string][] = [
  ...(['claim', 'create-link', 'add-address', 'add-route'] as const).flatMap((step) => [
    ['ipv6', step] as ['ipv6', string],
    ['dual', step] as ['dual', string],
  ]),
  ['dual', 'between-claims'],
  ['ipv6', 'claim-egress'],
];

describe.skipIf(skip)('a repeated ADD after a break, IPv6 and dual (private host netns)', () => {
  let host: { leave(): void } | undefined;
  let f: NodeFixture;
  let agent: AgentProcess | undefined;
  beforeAll(async () => {
    host = PrivateHost.enter(`vl6r-${RUN}`);
    execFileSync('ip', ['link', 'add', 'boot0', 'type', 'veth', 'peer', 'name', 'boot0p']);
    execFileSync('ip', ['addr', 'add', '10.77.0.5/24', 'dev', 'boot0']);
    execFileSync('ip', ['link', 'set', 'boot0', 'up']);
    f = await NodeFixture.start();
    const node = { instanceArn: f.arn, instanceId: f.imds.instanceId, eniId: f.eniId, mac: f.masterMac };
    await writeLaunchLeases(f.store, node, 'dual', 16);
  }, 120_000);
  afterEach(async () => {
    if (agent && agent.child.exitCode === null) await agent.kill();
    agent = undefined;
  });
  afterAll(async () => {
    await f?.close();
    host?.leave();
  });

  const claimedBy = async (containerId: string) =>
    (await f.store.listLeases(f.arn, { state: 'CLAIMED' }))
      .filter((l) => l.holder?.containerId === containerId)
      .map((l) => l.ip)
      .sort();
  const globalAddresses = (netns: string, dev: string) =>
    ((f.ipJson(netns, 'addr', 'show', dev)[0]?.['addr_info'] ?? []) as { scope: string; local: string }[])
      .filter((a) => a.scope === 'global')
      .map((a) => a.local)
      .sort();
  /** The IPv4 egress addresses held by this attachment (each file holds its holder's key). */
  const egressAddresses = (containerId: string) => {
    const dir = join(f.dataDir, 'egress4');
    try {
      return readdirSync(dir).filter((ip) => readFileSync(join(dir, ip), 'utf8') === `${containerId}/eth0`);
    } catch {
      return [];
    }
  };
  /** What the agent leaves when it stops right after `step`: polled until visible, then it is killed there. */
  const reached = async (step: string, family: string, netns: string, containerId: string): Promise<boolean> => {
    if (step === 'claim') return (await claimedBy(containerId)).length === (family === 'dual' ? 2 : 1);
    if (step === 'between-claims') return (await claimedBy(containerId)).length === 1;
    if (step === 'create-link') return f.podLinks(netns).length > 0;
    if (step === 'add-address') return f.podLinks(netns).length > 0 && globalAddresses(netns, 'eth0').length > 0;
    if (step === 'add-route') return f.ipJson(netns, '-6', 'route', 'show', 'default').length > 0;
    return egressAddresses(containerId).length > 0; // claim-egress
  };

  it.each(CASES)(
    '%s: an ADD killed after %s ends, run again, with its leases once each',
    async (family, step) => {
      const socket = join(f.dir, `run-${family}-${step}`, 'agent.sock');
      agent = await startAgent(f.cni, socket, { ...f.baseEnv(), VPC_LEASE_TEST_HANG_AT: step });
      const netns = f.addNetns();
      const containerId = `readd-${RUN}-${family}-${step}`;
      const conf = f.netconf('1.0.0', { ipFamily: family });
      const viaShim = { executable: shimBeside(f.cni), env: { VPC_LEASE_AGENT_SOCKET: socket } };
      const pending = f.run('ADD', { netns, containerId, ...viaShim }, conf);
      for (const deadline = Date.now() + 90_000; !(await reached(step, family, netns, containerId)); ) {
        if (Date.now() > deadline) throw new Error(`the agent never reached ${step}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const before = await claimedBy(containerId);
      await agent.kill();

      const add = await pending;
      expect(add.code, add.stdout).toBe(0);
      expect(loggedPids(f.logFile, 'added', containerId)).not.toContain(agent.pid);
      const ips = ((add.json?.['ips'] ?? []) as { address: string }[]).map((a) => a.address.split('/')[0]!).sort();
      expect(ips).toHaveLength(family === 'dual' ? 2 : 1);
      // The leases held before the break are the ones the pod ends with (a dual pod broken between its claims
      // completes the pair), one per family, and nothing else is claimed for it.
      for (const ip of before) expect(ips).toContain(ip);
      expect(await claimedBy(containerId)).toEqual(ips);
      expect(globalAddresses(netns, 'eth0')).toEqual(ips);
      expect(f.podLinks(netns).sort()).toEqual(['eth0', 'vh-eth0']);
      expect(f.ipJson(netns, '-6', 'route', 'show', 'default')).toHaveLength(1);
      if (family === 'dual') expect(f.ipJson(netns, '-4', 'route', 'show', 'default')).toHaveLength(1);
      // An IPv6-only pod's IPv4 egress: one address on its veth, the only one held for the attachment.
      const egress = egressAddresses(containerId);
      expect(egress).toHaveLength(family === 'ipv6' ? 1 : 0);
      expect(globalAddresses(netns, 'vh-eth0')).toEqual(egress);

      const del = await f.run('DEL', { netns, containerId, ...viaShim }, conf);
      expect(del.code, del.stdout).toBe(0);
      expect(await claimedBy(containerId)).toEqual([]);
      expect(egressAddresses(containerId)).toEqual([]);
    },
    180_000,
  );
});
