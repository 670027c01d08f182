import { mkdtempSync, rmSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { HEALTH_PATH } from '../../node/metrics/server.js';
import { buildCni } from '../../packaging/build.js';
import { missing } from '../support/capabilities.js';
import { type AgentProcess, loggedLine, metricsUrlOf, startAgent } from './support/agent-process.js';

/**
 * /healthz on the metrics listener against a real agent (for people and scrapers; the DaemonSet's probes read the
 * agent's private health socket, test/node/agent-handoff.test.ts): 200 while it serves its socket; 503 once the
 * socket is gone; no answer at all while the agent is stalled.
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

  async function started(extra: Record<string, string> = {}): Promise<{ socket: string; health: string }> {
    const socket = join(mkdtempSync(join(dir, 'run-')), 'agent.sock');
    agent = await startAgent(cni, socket, {
      PATH: process.env['PATH'] ?? '/usr/bin:/bin',
      VPC_LEASE_METRICS_ADDRESS: '127.0.0.1:0',
      ...extra,
    });
    return { socket, health: new URL(HEALTH_PATH, await metricsUrlOf(agent)).href };
  }
  const probe = async (url: string, timeoutMs = 5_000) => {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    return { status: res.status, body: (await res.text()).trim() };
  };

  it('answers 200 while the agent serves, 503 naming the cause once its socket is gone', async () => {
    // The agent binds a removed socket again on its next look: an hour away here, so the probe sees the gap.
    const { socket, health } = await started({
      VPC_LEASE_TEST_MODE: '1',
      VPC_LEASE_TEST_OWNERSHIP_CHECK_MS: '3600000',
    });
    expect(await probe(health)).toEqual({ status: 200, body: `serving (pid ${agent!.pid})` });
    // What a shim would meet: no socket at the path (removed under a running agent).
    unlinkSync(socket);
    const gone = await probe(health);
    expect(gone.status).toBe(503);
    expect(gone.body).toContain(`cannot connect to ${socket}: ENOENT`);
  });

  it('binds its socket again when it was removed and nothing else took the path', async () => {
    const { socket, health } = await started();
    unlinkSync(socket);
    await loggedLine(agent!, 'agent: its socket was removed; bound it again');
    expect(await probe(health)).toEqual({ status: 200, body: `serving (pid ${agent!.pid})` });
  });

  it('will not start without a capability the DaemonSet adds, and names it', async () => {
    const socket = join(mkdtempSync(join(dir, 'run-')), 'agent.sock');
    // As a securityContext that dropped ALL and forgot SYS_ADMIN would start it.
    const started = startAgent(cni, socket, { PATH: process.env['PATH'] ?? '/usr/bin:/bin' }, [
      'setpriv',
      '--bounding-set=-sys_admin',
      '--',
    ]);
    await expect(started).rejects.toThrow(/exited \(1\) before listening/);
    const err = await started.catch((e: Error) => e.message);
    expect(err).toContain('agent lacks capabilities its securityContext must add');
    expect(err).toContain('CAP_SYS_ADMIN: setns(2) into pods’ network namespaces');
    expect(err).not.toContain('CAP_NET_ADMIN');
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
