import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fallbackRecordsPath } from '../../../node/metrics/fallback-records.js';
import { NodeMetrics } from '../../../node/metrics/node-metrics.js';
import { type MetricsServer, startMetricsServer } from '../../../node/metrics/server.js';
import { missing } from '../../support/capabilities.js';
import { type PrometheusHandle, startPrometheus } from '../../support/prometheus.js';
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
 * A real Prometheus scrapes the node's /metrics while real plugin processes run ADD and DEL in network
 * namespaces; PromQL over its HTTP API must return the counts those commands produced.
 */
describe.skipIf(skip)('Prometheus scrapes the node metrics', () => {
  let fixture: NodeFixture;
  let metrics: NodeMetrics;
  let server: MetricsServer;
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
    await fixture.seed(6);
    await fixture.setPhase('READY');
    metrics = new NodeMetrics({
      version: 'test',
      nowMs: Date.now,
      readLeases: () => fixture.store.listLeases(fixture.arn),
      leasesMaxAgeMs: 0,
      fallbackDataDir: fixture.dataDir,
    });
    server = await startMetricsServer(metrics.registry, { host: '127.0.0.1', port: 0 });
    prometheus = await startPrometheus([{ job: 'vpc-lease-node', url: server.url }]);

    const pods = [0, 1, 2, 3].map((i) => ({ containerId: `prom-${i}`, netns: fixture.addNetns() }));
    for (const pod of pods) expect((await fixture.run('ADD', pod)).code).toBe(0);
    expect((await fixture.run('DEL', pods[0]!)).code).toBe(0);
    // An ADD into a namespace that does not exist: CNI code 3, counted as an error.
    const failed = await fixture.run('ADD', { containerId: 'prom-x', netns: '/var/run/netns/vpc-lease-no-such-ns' });
    expect(failed.json?.['code']).toBe(3);

    // Every record handed to the metrics (both drain steps done), then one Prometheus scrape after that.
    const live = fallbackRecordsPath(fixture.dataDir);
    polls['drain'] = await until(() => !existsSync(live) && !existsSync(`${live}.draining`), 'the records drained');
    polls['scrape'] = await prometheus.waitForScrapeAfter(Date.now());
  }, 180_000);

  afterAll(async () => {
    process.stderr.write(`prometheus test polls: ${JSON.stringify(polls)}\n`);
    await prometheus?.close();
    await server?.close();
    await fixture?.close();
  });

  it('returns the ADD and DEL counts by result and code', async () => {
    await expectValue('vpc_lease_cni_requests_total{command="ADD",result="success",code="0"}', 4);
    await expectValue('vpc_lease_cni_requests_total{command="ADD",result="error",code="3"}', 1);
    await expectValue('sum(vpc_lease_cni_requests_total{command="DEL"})', 1);
    await expectValue('sum(vpc_lease_fallback_executions_total)', 6);
    await expectValue('sum by (path) (vpc_lease_cni_request_duration_seconds_count{command="ADD",path="fallback"})', 5);
  });

  it('returns the leases by state that the commands left in the store', async () => {
    await expectValue('vpc_lease_node_leases{state="CLAIMED"}', 3);
    await expectValue('sum(vpc_lease_node_leases{state=~"FREE|COOLDOWN"})', 3);
    await expectValue('vpc_lease_build_info{version="test"}', 1);
  });

  it('fails on a wrong count (negative control)', async () => {
    await expect(
      expectValue('vpc_lease_cni_requests_total{command="ADD",result="success",code="0"}', 5),
    ).rejects.toThrow(/= 4, expected 5/);
    await expect(expectValue('vpc_lease_node_leases{state="CLAIMED"}', 4)).rejects.toThrow(/= 3, expected 4/);
  });

  it('serves an exposition that promtool accepts without lint problems', async () => {
    const body = await (await fetch(server.url)).text();
    const out = execFileSync('promtool', ['check', 'metrics'], { input: body, encoding: 'utf8' });
    expect(out.trim()).toBe('');
  });
});
