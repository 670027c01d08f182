import { mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Journal } from '../../node/journal/journal.js';
import { missing } from '../support/capabilities.js';
import type { PluginRun } from '../support/plugin-process.js';
import { type AgentProcess, loggedPids, shimBeside, startAgent } from './support/agent-process.js';
import { NodeFixture } from './support/node-fixture.js';

/**
 * A rolling update as the node sees it at its worst: the agent SIGKILLed with ADDs in flight, ADDs arriving while
 * no agent listens (its socket file still there), then a new agent on the same socket. Every ADD must end in a
 * success or a retryable error (code 11), with no container holding two leases and none left claimed after DEL.
 */
const skip = missing('root', 'netns', 'go-plugins');

describe.skipIf(skip)('agent upgrade: SIGKILL and restart with ADDs in flight', () => {
  let f: NodeFixture;
  const agents: AgentProcess[] = [];
  beforeAll(async () => {
    f = await NodeFixture.start();
    await f.seed(48);
  });
  afterAll(async () => {
    for (const a of agents) if (a.child.exitCode === null) await a.kill();
    await f?.close();
  });

  it('ends every ADD in success or code 11, with no duplicate and no leaked lease', async () => {
    const socket = join(mkdtempSync(join(f.dir, 'run-')), 'vpc-lease', 'agent.sock');
    const shim = shimBeside(f.cni);
    // A slow store must not turn into failures here: this test is about the kill, not about timeouts.
    const conf = f.netconf('1.0.0', { storeTimeoutMs: 60_000 });
    const pods: { netns: string; containerId: string; wave: number }[] = [];
    const add = (wave: number, count: number): Promise<PluginRun>[] =>
      Array.from({ length: count }, (_, i) => {
        const pod = { netns: f.addNetns(), containerId: `upg-${wave}-${i}`, wave };
        pods.push(pod);
        return f.run('ADD', { ...pod, executable: shim, env: { VPC_LEASE_AGENT_SOCKET: socket } }, conf);
      });
    const claimedOfOurs = async () =>
      (await f.store.listLeases(f.arn, { state: 'CLAIMED' })).filter((l) => l.holder?.containerId.startsWith('upg-'));

    const first = await startAgent(f.cni, socket, f.baseEnv());
    agents.push(first);
    const inFlight = add(1, 12);
    // Kill once the agent is inside the ADDs: its first claim is in the store.
    for (const deadline = Date.now() + 60_000; (await claimedOfOurs()).length === 0; ) {
      if (Date.now() > deadline) throw new Error('no ADD reached the store');
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    await first.kill();
    // No agent now, but its socket file remains: these connect, are refused by the kernel, and fall back.
    const whileDown = add(2, 6);
    const second = await startAgent(f.cni, socket, f.baseEnv());
    agents.push(second);
    const afterRestart = add(3, 6);
    const results = await Promise.all([...inFlight, ...whileDown, ...afterRestart]);

    const outcomes = results.map((r) => (r.code === 0 ? 'ok' : `code ${String(r.json?.['code'])}`));
    expect(
      outcomes.filter((o) => o !== 'ok' && o !== 'code 11'),
      JSON.stringify(results.map((r) => r.stdout)),
    ).toEqual([]);
    // The restarted agent serves the last wave.
    for (const pod of pods.filter((p) => p.wave === 3))
      expect(loggedPids(f.logFile, 'added', pod.containerId)).toContain(second.pid);
    // A call run twice (the agent's answer lost, or accepted just as the shim gave up) is safe, and counted.
    const reruns = pods.filter((p) => loggedPids(f.logFile, 'added', p.containerId).length > 1).length;

    const claimed = await claimedOfOurs();
    const byContainer = new Map<string, string[]>();
    for (const l of claimed)
      byContainer.set(l.holder!.containerId, [...(byContainer.get(l.holder!.containerId) ?? []), l.ip]);
    for (const [i, pod] of pods.entries()) {
      const r = results[i]!;
      const held = byContainer.get(pod.containerId) ?? [];
      // Exactly the result's address for a success; nothing for a retryable failure (its claim was undone).
      if (r.code === 0)
        expect(held.map((ip) => `${ip}/24`)).toEqual([(r.json as { ips: { address: string }[] }).ips[0]!.address]);
      else expect(held).toEqual([]);
    }
    process.stdout.write(
      `agent upgrade: ${outcomes.filter((o) => o === 'ok').length} ok, ${outcomes.filter((o) => o === 'code 11').length} code 11 of ${outcomes.length}; ${reruns} run twice\n`,
    );

    for (const pod of pods) {
      const del = await f.run('DEL', { ...pod, executable: shim, env: { VPC_LEASE_AGENT_SOCKET: socket } }, conf);
      expect(del.code, del.stdout).toBe(0);
    }
    expect(await claimedOfOurs()).toEqual([]);
    const journal = new Journal(f.dataDir);
    expect(pods.filter((p) => journal.read(p.containerId, 'eth0') !== undefined)).toEqual([]);
  }, 300_000);
});
