import { mkdtempSync, rmSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { HEALTH_PATH } from '../../node/metrics/server.js';
import { buildCni } from '../../packaging/build.js';
import { missing } from '../support/capabilities.js';
import { type AgentProcess, metricsUrlOf, startAgent } from './support/agent-process.js';

/**
 * The DaemonSet's liveness and readiness probes (httpGet /healthz on the metrics listener) against a real agent:
 * 200 while it serves its socket; 503 once the socket is gone; no answer at all while the agent is stalled.
 */
const skip = missing('root');

describe.skipIf(skip)('the agent’s /healthz', () => {
  let dir: string;
  let cni: string;
  let agent: AgentProcess | undefined;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'vpc-lease-health-'));
    cni = await buildCni(join(dir, 'bin'));
  }, 300_000);
  afterEach(async () => {
    if (agent?.child.exitCode === null) {
      agent.child.kill('SIGCONT');
      await agent.kill();
    }
    agent = undefined;
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  async function started(): Promise<{ socket: string; health: string }> {
    const socket = join(mkdtempSync(join(dir, 'run-')), 'agent.sock');
    agent = await startAgent(cni, socket, {
      PATH: process.env['PATH'] ?? '/usr/bin:/bin',
      VPC_LEASE_METRICS_ADDRESS: '127.0.0.1:0',
    });
    return { socket, health: new URL(HEALTH_PATH, await metricsUrlOf(agent)).href };
  }
  const probe = async (url: string, timeoutMs = 5_000) => {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    return { status: res.status, body: (await res.text()).trim() };
  };

  it('answers 200 while the agent serves, 503 naming the cause once its socket is gone', async () => {
    const { socket, health } = await started();
    expect(await probe(health)).toEqual({ status: 200, body: 'serving' });
    // What a shim would meet: no socket at the path (removed under a running agent).
    unlinkSync(socket);
    const gone = await probe(health);
    expect(gone.status).toBe(503);
    expect(gone.body).toContain(`cannot connect to ${socket}: ENOENT`);
  });

  it('gives no answer while the agent is stalled, and 200 again once it runs', async () => {
    const { health } = await started();
    expect((await probe(health)).status).toBe(200);
    agent!.child.kill('SIGSTOP');
    await expect(probe(health, 1_000)).rejects.toThrow(/aborted|timeout/i);
    agent!.child.kill('SIGCONT');
    expect((await probe(health)).status).toBe(200);
  });
});
