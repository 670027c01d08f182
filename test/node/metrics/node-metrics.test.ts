import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CniCode, CniError } from '../../../node/cni/errors.js';
import type { CniHandlers, CniRequest } from '../../../node/cni/skel.js';
import { renderExposition } from '../../../node/metrics/exposition.js';
import {
  appendFallbackRecord,
  drainFallbackRecords,
  FALLBACK_RECORDS_MAX_BYTES,
  fallbackRecordsPath,
} from '../../../node/metrics/fallback-records.js';
import {
  EVENT_LOOP_SAMPLE_MS,
  LEASES_RETRY_MIN_MS,
  NODE_METRIC_NAMES,
  NodeMetrics,
} from '../../../node/metrics/node-metrics.js';
import { observeHandlers } from '../../../node/metrics/observe-handlers.js';
import { observeDynamo } from '../../../node/metrics/observed-dynamo.js';
import type { Lease } from '../../../shared/domain/lease.js';
import type { DynamoApi } from '../../../shared/dynamo/api.js';
import { DynamoServiceError } from '../../../shared/dynamo/errors.js';
import { NoFreeLeaseError } from '../../../shared/errors.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'vpc-lease-metrics-'));
  dirs.push(d);
  return d;
}

async function scrape(metrics: NodeMetrics): Promise<string> {
  return renderExposition(await metrics.registry.collect());
}

function lease(ip: string, state: Lease['state'], reusableAtMs?: number): Lease {
  return {
    instanceArn: 'arn:aws:ec2:us-east-1:123456789012:instance/i-0123456789abcdef0',
    ip,
    state,
    eniId: 'eni-1',
    deviceIndex: 1,
    mac: '02:00:00:00:00:01',
    subnetId: 'subnet-1',
    subnetCidr: '10.0.0.0/24',
    gateway: '10.0.0.1',
    createdAtMs: 0,
    version: 1,
    ...(reusableAtMs !== undefined ? { reusableAtMs } : {}),
  };
}

/** Metrics whose lease reads go through `readLeases`, with a 30 s read window on the given clock. */
function readingLeases(nowMs: () => number, readLeases: () => Promise<readonly Lease[]>): NodeMetrics {
  return new NodeMetrics({ version: '0', nowMs, leasesMaxAgeMs: 30_000, readLeases });
}

describe('Class: NodeMetrics', () => {
  it('counts commands by result and code, and times them per path', async () => {
    const metrics = new NodeMetrics({ version: '9.9.9', nowMs: () => 0 });
    metrics.observeCommand({ command: 'ADD', path: 'agent', code: 0, durationS: 0.02 });
    metrics.observeCommand({ command: 'ADD', path: 'agent', code: 11, durationS: 0.3 });
    metrics.observeCommand({ command: 'DEL', path: 'fallback', code: 0, durationS: 0.2 });
    const text = await scrape(metrics);
    expect(text).toContain('vpc_lease_cni_requests_total{command="ADD",result="success",code="0"} 1\n');
    expect(text).toContain('vpc_lease_cni_requests_total{command="ADD",result="error",code="11"} 1\n');
    expect(text).toContain('vpc_lease_cni_request_duration_seconds_count{command="ADD",path="agent"} 2\n');
    expect(text).toContain('vpc_lease_cni_request_duration_seconds_count{command="DEL",path="fallback"} 1\n');
    expect(text).toContain('vpc_lease_fallback_executions_total{command="DEL"} 1\n');
    expect(text).not.toContain('vpc_lease_fallback_executions_total{command="ADD"}');
    expect(text).toMatch(/^vpc_lease_build_info\{version="9\.9\.9",runtime="v\d+[^"]*",arch="\w+"\} 1$/m);
  });

  it('reads leases by state on scrape, at most once per window, and drops them when the read fails', async () => {
    let nowMs = 1_000_000;
    let reads = 0;
    let fail = false;
    const metrics = readingLeases(
      () => nowMs,
      async () => {
        reads += 1;
        if (fail) throw new Error('store down');
        return [
          lease('10.0.0.2', 'FREE'),
          lease('10.0.0.3', 'CLAIMED'),
          lease('10.0.0.4', 'COOLDOWN', nowMs - 1),
          lease('10.0.0.5', 'COOLDOWN', nowMs + 60_000),
        ];
      },
    );
    let text = await scrape(metrics);
    expect(text).toContain('vpc_lease_node_leases{state="COOLDOWN"} 2\n');
    expect(text).toContain('vpc_lease_node_leases{state="RELEASING"} 0\n');
    expect(text).toContain('vpc_lease_node_claimable_leases 2\n');
    nowMs += 29_999;
    await scrape(metrics);
    expect(reads).toBe(1);
    nowMs += 1;
    fail = true;
    text = await scrape(metrics);
    expect(reads).toBe(2);
    expect(text).not.toMatch(/^vpc_lease_node_leases\{/m);
    expect(text).not.toMatch(/^vpc_lease_node_claimable_leases /m);
  });

  it('reads the leases once for concurrent scrapes, and backs off after a failure, doubling to the window', async () => {
    let nowMs = 1_000_000;
    let reads = 0;
    let fail = true;
    let answer: (() => void) | undefined;
    const metrics = readingLeases(
      () => nowMs,
      async () => {
        reads += 1;
        await new Promise<void>((resolve) => {
          answer = resolve;
        });
        if (fail) throw new Error('store down');
        return [lease('10.0.0.2', 'FREE')];
      },
    );
    const scrapes = [scrape(metrics), scrape(metrics), scrape(metrics)];
    await new Promise((resolve) => setImmediate(resolve));
    answer?.();
    await Promise.all(scrapes);
    expect(reads).toBe(1);
    // Failed: no read for LEASES_RETRY_MIN_MS, then 10 s, 20 s, and the window (30 s) at most.
    const readsAfter = async (ms: number): Promise<number> => {
      nowMs += ms;
      const s = scrape(metrics);
      await new Promise((resolve) => setImmediate(resolve));
      answer?.();
      await s;
      return reads;
    };
    expect(await readsAfter(LEASES_RETRY_MIN_MS - 1)).toBe(1);
    expect(await readsAfter(1)).toBe(2);
    expect(await readsAfter(2 * LEASES_RETRY_MIN_MS - 1)).toBe(2);
    expect(await readsAfter(1)).toBe(3);
    expect(await readsAfter(20_000)).toBe(4);
    expect(await readsAfter(29_999)).toBe(4);
    fail = false;
    expect(await readsAfter(1)).toBe(5);
    expect(await scrape(metrics)).toContain('vpc_lease_node_claimable_leases 1\n');
  });

  it('times DynamoDB requests and labels failures with the error type', async () => {
    const metrics = new NodeMetrics({ version: '0', nowMs: () => 0 });
    const fake = {
      getItem: async () => ({}),
      query: async () => {
        throw new DynamoServiceError('ProvisionedThroughputExceededException', 'slow down', 400);
      },
    } as unknown as DynamoApi;
    const api = observeDynamo(fake, metrics.observeStoreRequest);
    await api.getItem({ TableName: 't', Key: {} });
    await expect(api.query({ TableName: 't' })).rejects.toThrow('slow down');
    const text = await scrape(metrics);
    expect(text).toContain('vpc_lease_store_request_duration_seconds_count{operation="GetItem"} 1\n');
    expect(text).toContain('vpc_lease_store_request_duration_seconds_count{operation="Query"} 1\n');
    expect(text).toContain(
      'vpc_lease_store_errors_total{operation="Query",error="ProvisionedThroughputExceededException"} 1\n',
    );
    expect(text).not.toContain('vpc_lease_store_errors_total{operation="GetItem"');
  });

  it('records how long synchronous work held the event loop', async () => {
    const metrics = new NodeMetrics({ version: '0.0.0', nowMs: () => 0 });
    const stop = metrics.sampleEventLoop();
    try {
      await new Promise((r) => setTimeout(r, EVENT_LOOP_SAMPLE_MS * 3)); // a tick or more: the sampler's clock runs
      const until = performance.now() + 40;
      while (performance.now() < until); // the loop held 40 ms: the next tick is at least 30 ms late
      await new Promise((r) => setTimeout(r, EVENT_LOOP_SAMPLE_MS * 3));
    } finally {
      stop();
    }
    const buckets = [
      ...(await scrape(metrics)).matchAll(/^vpc_lease_agent_event_loop_delay_seconds_bucket\{le="([^"]+)"\} (\d+)$/gm),
    ];
    const count = (le: string): number => Number(buckets.find((b) => b[1] === le)?.[2]);
    expect(count('+Inf')).toBeGreaterThan(count('0.02')); // one sample, at least, over 20 ms
  });

  it('exports every name of NODE_METRIC_NAMES and nothing else', () => {
    const metrics = new NodeMetrics({ version: '0', nowMs: () => 0 });
    expect(metrics.registry.names().sort()).toEqual(Object.values(NODE_METRIC_NAMES).sort());
  });
});

describe('Function: observeHandlers', () => {
  it('reports 0 for a success and the printed CNI code for a failure, and rethrows', async () => {
    const seen: { command: string; code: number }[] = [];
    const base: CniHandlers = {
      ADD: async () => ({ ok: true }),
      DEL: async () => {
        throw new NoFreeLeaseError('none');
      },
      CHECK: async () => {
        throw new CniError(CniCode.checkFailed, 'mismatch');
      },
      GC: async () => undefined,
      STATUS: async () => undefined,
    };
    const handlers = observeHandlers(base, (req, o) => seen.push({ command: req.command, code: o.code }));
    const request = (command: CniRequest['command']) => ({ command }) as CniRequest;
    expect(await handlers.ADD(request('ADD'))).toEqual({ ok: true });
    await expect(handlers.DEL(request('DEL'))).rejects.toThrow(NoFreeLeaseError);
    await expect(handlers.CHECK(request('CHECK'))).rejects.toThrow('mismatch');
    expect(seen).toEqual([
      { command: 'ADD', code: 0 },
      { command: 'DEL', code: 11 },
      { command: 'CHECK', code: 101 },
    ]);
  });
});

describe('Functions: appendFallbackRecord / drainFallbackRecords', () => {
  it('hands each record over once, one drain after it was set aside, skipping ill-formed lines', () => {
    const dir = tempDir();
    expect(appendFallbackRecord(dir, { command: 'ADD', code: 0, durationS: 0.2, atMs: 1 })).toBe(true);
    appendFileSync(fallbackRecordsPath(dir), 'not json\n{"command":"RM","code":0,"durationS":1}\n');
    expect(drainFallbackRecords(dir, Date.now())).toEqual([]);
    appendFallbackRecord(dir, { command: 'DEL', code: 11, durationS: 0.1, atMs: 2 });
    // Set aside less than a second ago: a late append may still be landing, so nothing is read yet.
    expect(drainFallbackRecords(dir, Date.now())).toEqual([]);
    expect(drainFallbackRecords(dir, Date.now() + 1500)).toEqual([
      { command: 'ADD', path: 'fallback', code: 0, durationS: 0.2 },
    ]);
    expect(drainFallbackRecords(dir, Date.now() + 3000)).toEqual([
      { command: 'DEL', path: 'fallback', code: 11, durationS: 0.1 },
    ]);
    expect(drainFallbackRecords(dir, Date.now() + 4500)).toEqual([]);
  });

  it('stops appending at the size bound (no agent drains a node without one)', () => {
    const dir = tempDir();
    writeFileSync(fallbackRecordsPath(dir), 'x'.repeat(FALLBACK_RECORDS_MAX_BYTES));
    expect(appendFallbackRecord(dir, { command: 'ADD', code: 0, durationS: 0.2, atMs: 1 })).toBe(false);
    expect(readFileSync(fallbackRecordsPath(dir), 'utf8')).toHaveLength(FALLBACK_RECORDS_MAX_BYTES);
  });
});
