import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fallbackRecordsPath } from '../../../node/metrics/fallback-records.js';
import { missing } from '../../support/capabilities.js';
import { type PrometheusHandle, startPrometheus } from '../../support/prometheus.js';
import { type AgentProcess, metricsUrlOf, shimBeside, startAgent } from '../support/agent-process.js';
import { NodeFixture } from '../support/node-fixture.js';

const skip = missing('root', 'netns', 'prometheus');

/** Polls a local condition (files the drain removes); returns how many polls it took, for the report. */
async function until(condition: () => boolean, what: string, timeoutMs = 30_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (let polls = 1; ; polls += 1) {
    if (condition()) return polls;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * A real Prometheus scrapes the node agent's /metrics while the shim runs ADD and DEL in network namespaces,
 * through the agent and, with the agent's socket absent, through the fallback plugin; PromQL over Prometheus's
 * HTTP API must return the counts those commands produced.
 */
describe.skipIf(skip)('Prometheus scrapes the node agent', () => {
  let fixture: NodeFixture;
  let agent: AgentProcess;
  let url: string;
  let prometheus: PrometheusHandle;
  const polls: Record<string, number> = {};

  async function value(promql: string): Promise<number | undefined> {
    const result = await prometheus.query(promql);
    if (result.length > 1) throw new Error(`${promql}: ${result.length} series, expected one`);
    return result[0]?.value;
  }

  async function expectValue(promql: string, expected: number): Promise<void> {
    const got = await value(promql);
    if (got !== expected) throw new Error(`${promql} = ${got}, expected ${expected}`);
  }

  beforeAll(async () => {
    fixture = await NodeFixture.start();
    await fixture.seed(8);
    await fixture.setPhase('READY');
    const socket = join(fixture.dir, 'agent', 'agent.sock');
    agent = await startAgent(fixture.cni, socket, {
      ...fixture.baseEnv(),
      VPC_LEASE_METRICS_ADDRESS: '127.0.0.1:0',
      VPC_LEASE_METRICS_LEASES_MAX_AGE_S: '1',
    });
    url = await metricsUrlOf(agent);
    prometheus = await startPrometheus([{ job: 'vpc-lease-agent', url }]);

    const shim = shimBeside(fixture.cni);
    const viaAgent = { executable: shim, env: { VPC_LEASE_AGENT_SOCKET: socket } };
    // A socket path with nothing there: the shim runs the full plugin, which leaves a fallback record.
    const viaFallback = { executable: shim, env: { VPC_LEASE_AGENT_SOCKET: join(fixture.dir, 'no-agent.sock') } };
    const pods = [0, 1, 2, 3, 4].map((i) => ({ containerId: `prom-${i}`, netns: fixture.addNetns() }));
    for (const pod of pods.slice(0, 3)) expect((await fixture.run('ADD', { ...pod, ...viaAgent })).code).toBe(0);
    expect((await fixture.run('DEL', { ...pods[0]!, ...viaAgent })).code).toBe(0);
    // An ADD into a namespace that does not exist: CNI code 3, counted as an error.
    const missingNs = { containerId: 'prom-x', netns: '/var/run/netns/vpc-lease-no-such-ns' };
    expect((await fixture.run('ADD', { ...missingNs, ...viaAgent })).json?.['code']).toBe(3);
    for (const pod of pods.slice(3)) expect((await fixture.run('ADD', { ...pod, ...viaFallback })).code).toBe(0);
    expect((await fixture.run('DEL', { ...pods[1]!, ...viaFallback })).code).toBe(0);

    // Every fallback record drained by the agent (both steps), then one Prometheus scrape after that.
    const live = fallbackRecordsPath(fixture.dataDir);
    polls['drain'] = await until(() => !existsSync(live) && !existsSync(`${live}.draining`), 'the records drained');
    const doneMs = Date.now();
    polls['scrape'] = await prometheus.waitForScrapeAfter(doneMs);
    // The lease gauges are read at most once a second: wait for a scrape carrying a read after the last command.
    polls['leases'] = await prometheus.waitForValue(`vpc_lease_node_leases_read_timestamp_seconds >= ${doneMs / 1000}`);
  }, 180_000);

  afterAll(async () => {
    process.stderr.write(`prometheus test polls: ${JSON.stringify(polls)}\n`);
    await prometheus?.close();
    await agent?.stop();
    await fixture?.close();
  });

  it('returns the ADD and DEL counts by result, code and path', async () => {
    await expectValue('vpc_lease_cni_requests_total{command="ADD",result="success",code="0"}', 5);
    await expectValue('vpc_lease_cni_requests_total{command="ADD",result="error",code="3"}', 1);
    await expectValue('sum(vpc_lease_cni_requests_total{command="DEL"})', 2);
    await expectValue('vpc_lease_cni_request_duration_seconds_count{command="ADD",path="agent"}', 4);
    await expectValue('vpc_lease_cni_request_duration_seconds_count{command="ADD",path="fallback"}', 2);
    await expectValue('sum(vpc_lease_fallback_executions_total)', 3);
  });

  it('returns the leases the commands left in the store, store requests and credential refreshes', async () => {
    await expectValue('vpc_lease_node_leases{state="CLAIMED"}', 3);
    await expectValue('sum(vpc_lease_node_leases{state=~"FREE|COOLDOWN"})', 5);
    await expectValue('vpc_lease_build_info', 1);
    // Each ADD and DEL through the agent asked the store at least once, and the lease gauges read it.
    expect(await value('sum(vpc_lease_store_request_duration_seconds_count)')).toBeGreaterThanOrEqual(5);
    expect(await value('vpc_lease_credential_refreshes_total{result="success"}')).toBeGreaterThanOrEqual(1);
  });

  it('fails on a wrong count (negative control)', async () => {
    await expect(
      expectValue('vpc_lease_cni_requests_total{command="ADD",result="success",code="0"}', 6),
    ).rejects.toThrow(/= 5, expected 6/);
    await expect(expectValue('vpc_lease_node_leases{state="CLAIMED"}', 4)).rejects.toThrow(/= 3, expected 4/);
  });

  it('serves an exposition that promtool accepts without lint problems', async () => {
    const body = await (await fetch(url)).text();
    const out = execFileSync('promtool', ['check', 'metrics'], { input: body, encoding: 'utf8' });
    expect(out.trim()).toBe('');
  });
});
