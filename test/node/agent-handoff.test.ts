import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { buildCni } from '../../packaging/build.js';
import { missing } from '../support/capabilities.js';
import { type AgentProcess, loggedLine, metricsUrlOf, shimBeside, startAgent } from './support/agent-process.js';

/**
 * Two agents on one node, as a DaemonSet rollout with maxSurge runs them: the newer one takes the socket path at
 * start, the older one sees that, stands by and lets the metrics port go, and the newer one binds it. Each one's
 * exec probe (the static shim reading its private health socket) answers for its own process. When the newer one
 * stops, the older one takes the path and the port back, so the node is never left without an agent.
 */
const skip = missing('root');

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

describe.skipIf(skip)('agent handoff: two agents on one node', () => {
  let dir: string;
  let cni: string;
  const agents: AgentProcess[] = [];
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'vpc-lease-handoff-'));
    cni = await buildCni(join(dir, 'bin'));
  }, 300_000);
  afterEach(async () => {
    for (const a of agents) if (a.child.exitCode === null) await a.kill();
    agents.length = 0;
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** The exec probe as the DaemonSet runs it. */
  const probe = (health: string, want: 'ready' | 'live'): Promise<{ code: number; line: string }> =>
    new Promise((resolve) => {
      execFile(shimBeside(cni), ['health', health, want], (err, stdout) =>
        resolve({ code: err ? Number(err.code) : 0, line: stdout.trim() }),
      );
    });
  /** Who answers the shared metrics port's /healthz (its pid is in the body). */
  const healthz = async (port: number): Promise<{ status: number; body: string }> => {
    const res = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(5_000) });
    return { status: res.status, body: (await res.text()).trim() };
  };
  const until = async (what: string, ok: () => Promise<boolean>): Promise<void> => {
    for (const deadline = Date.now() + 30_000; !(await ok()); ) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };

  it('hands the socket and the metrics port to the newer agent and back, each probe answering for its own process', async () => {
    const run = mkdtempSync(join(dir, 'run-'));
    const socket = join(run, 'vpc-lease', 'agent.sock');
    const port = await freePort();
    const env = { PATH: process.env['PATH'] ?? '/usr/bin:/bin', VPC_LEASE_METRICS_ADDRESS: `127.0.0.1:${port}` };
    const start = async (name: string): Promise<{ agent: AgentProcess; health: string }> => {
      const health = join(mkdtempSync(join(dir, `${name}-private-`)), 'health.sock');
      const agent = await startAgent(cni, socket, env, [], ['--health-socket', health]);
      agents.push(agent);
      return { agent, health };
    };

    const old = await start('old');
    await metricsUrlOf(old.agent);
    expect(await healthz(port)).toEqual({ status: 200, body: `serving (pid ${old.agent.pid})` });
    expect((await probe(old.health, 'ready')).code).toBe(0);

    const next = await start('new');
    // The port is still the older agent's: the newer one says so and keeps trying, not swallowing EADDRINUSE.
    const taken = await loggedLine(next.agent, 'metrics port taken; retrying until its holder lets go');
    expect(taken['port']).toBe(port);
    await loggedLine(old.agent, 'agent: another agent took the socket; standing by');
    const bound = await loggedLine(next.agent, 'metrics listening');
    expect(await healthz(port)).toEqual({ status: 200, body: `serving (pid ${next.agent.pid})` });
    expect((await probe(next.health, 'ready')).code).toBe(0);
    const standing = await probe(old.health, 'ready');
    expect(standing).toEqual({ code: 1, line: `live standing by: another agent serves ${socket}` });
    expect((await probe(old.health, 'live')).code).toBe(0);

    // The newer agent goes (a rollback, or its crash): the older one takes the path and then the port back.
    await next.agent.stop();
    await loggedLine(old.agent, 'agent: nothing served the socket; took it back');
    await until(
      'the old agent to answer the port again',
      async () => (await healthz(port).catch(() => undefined))?.body === `serving (pid ${old.agent.pid})`,
    );
    expect((await probe(old.health, 'ready')).code).toBe(0);
    // A stalled agent fails even the liveness probe: the shim gives up on its silent health socket.
    old.agent.child.kill('SIGSTOP');
    const stalled = await probe(old.health, 'live');
    old.agent.child.kill('SIGCONT');
    expect(stalled).toEqual({ code: 1, line: 'down no answer' });
    // How many times the newer agent found the port still taken before the older one let go (reported, not bounded).
    process.stdout.write(`metrics port retries before the handoff: ${String(bound['retries'])}\n`);
  }, 120_000);
});
