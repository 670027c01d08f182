import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A real Prometheus server (Debian's `prometheus`) on loopback with a private TSDB, scraping the given targets
 * every `scrapeIntervalS`. Tests wait on its own scrape (`lastScrape` in /api/v1/targets), never on a sleep.
 */
export interface PrometheusHandle {
  readonly url: string;
  /** An instant query; the vector's samples as {labels, value}. */
  query(promql: string): Promise<{ metric: Record<string, string>; value: number }[]>;
  /** Resolves once every target has been scraped, successfully, at or after `afterMs`; how many polls it took. */
  waitForScrapeAfter(afterMs: number, timeoutMs?: number): Promise<number>;
  /** Resolves once `promql` returns a non-empty vector (a filter such as `x >= 5`); how many polls it took. */
  waitForValue(promql: string, timeoutMs?: number): Promise<number>;
  close(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function getJson<T>(url: string): Promise<T> {
  const res = await fetch(url);
  const body = (await res.json()) as { status: string; data: T; error?: string };
  if (body.status !== 'success') throw new Error(`Prometheus ${url}: ${body.error ?? res.status}`);
  return body.data;
}

export async function startPrometheus(
  targets: readonly { job: string; url: string }[],
  scrapeIntervalS = 1,
): Promise<PrometheusHandle> {
  const dir = mkdtempSync(join(tmpdir(), 'vpc-lease-prometheus-'));
  const scrapeConfigs = targets.map((t) => {
    const u = new URL(t.url);
    return [
      `  - job_name: ${JSON.stringify(t.job)}`,
      `    scrape_interval: ${scrapeIntervalS}s`,
      `    scrape_timeout: ${scrapeIntervalS}s`,
      `    metrics_path: ${JSON.stringify(u.pathname)}`,
      `    static_configs: [{ targets: [${JSON.stringify(u.host)}] }]`,
    ].join('\n');
  });
  writeFileSync(join(dir, 'prometheus.yml'), `scrape_configs:\n${scrapeConfigs.join('\n')}\n`);
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const log: string[] = [];
  const child: ChildProcess = spawn(
    '/usr/bin/prometheus',
    [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  child.stderr?.on('data', (c: Buffer) => log.push(c.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const close = async () => {
    if (child.exitCode === null) child.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  };
  // Ready once its web server answers /-/ready (TSDB open, config loaded); an early exit is a failure.
  for (;;) {
    const state = await Promise.race([
      exited.then(() => 'exited' as const),
      fetch(`${url}/-/ready`)
        .then((r) => (r.ok ? ('ready' as const) : ('wait' as const)))
        .catch(() => 'wait' as const),
    ]);
    if (state === 'ready') break;
    if (state === 'exited') {
      await close();
      throw new Error(`prometheus exited before it was ready:\n${log.join('')}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const query = async (promql: string) => {
    const data = await getJson<{ result: { metric: Record<string, string>; value: [number, string] }[] }>(
      `${url}/api/v1/query?query=${encodeURIComponent(promql)}`,
    );
    return data.result.map((r) => ({ metric: r.metric, value: Number(r.value[1]) }));
  };
  return {
    url,
    query,
    async waitForScrapeAfter(afterMs, timeoutMs = 60_000) {
      const deadline = Date.now() + timeoutMs;
      for (let polls = 1; ; polls += 1) {
        const data = await getJson<{ activeTargets: { health: string; lastScrape: string; lastError: string }[] }>(
          `${url}/api/v1/targets?state=active`,
        );
        const done = data.activeTargets.every((t) => t.health === 'up' && Date.parse(t.lastScrape) >= afterMs);
        if (done && data.activeTargets.length === targets.length) return polls;
        if (Date.now() > deadline)
          throw new Error(`no scrape after ${new Date(afterMs).toISOString()}: ${JSON.stringify(data.activeTargets)}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    },
    async waitForValue(promql, timeoutMs = 60_000) {
      const deadline = Date.now() + timeoutMs;
      for (let polls = 1; ; polls += 1) {
        if ((await query(promql)).length > 0) return polls;
        if (Date.now() > deadline) throw new Error(`${promql} stayed empty for ${timeoutMs} ms`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    },
    close,
  };
}
