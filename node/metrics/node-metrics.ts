import { isClaimable, LEASE_STATES, type Lease } from '../../shared/domain/lease.js';
import { errorMessage } from '../../shared/errors.js';
import type { Logger } from '../../shared/log.js';
import { drainFallbackRecords } from './fallback-records.js';
import { Registry } from './registry.js';

/** The commands counted; `unknown` keeps a garbled CNI_COMMAND from making a new series per value. */
export type CniMetricCommand = 'ADD' | 'DEL' | 'CHECK' | 'GC' | 'STATUS' | 'VERSION' | 'unknown';
/** Who ran a command: the resident agent, or the full plugin the shim executed because the agent did not answer. */
export type CommandPath = 'agent' | 'fallback';

/** One finished CNI command, as the agent (or a fallback record) reports it. */
export interface CommandObservation {
  readonly command: CniMetricCommand;
  readonly path: CommandPath;
  /** 0 on success, else the CNI error code printed. */
  readonly code: number;
  readonly durationS: number;
}

export interface NodeMetricsOptions {
  readonly version: string;
  readonly nowMs: () => number;
  /** This node's leases (one consistent Query of its partition); absent: no lease gauges. */
  readonly readLeases?: () => Promise<readonly Lease[]>;
  /** Scrapes within this age reuse the last read: one Query per window however many scrapers there are. */
  readonly leasesMaxAgeMs?: number;
  /** The plugin's dataDir: its fallback records are drained into the command metrics on every scrape. */
  readonly fallbackDataDir?: string;
  readonly log?: Logger;
}

export const DEFAULT_LEASES_MAX_AGE_MS = 30_000;
/** After a failed read of the leases, scrapes wait this long before the next, doubling up to the read window. */
export const LEASES_RETRY_MIN_MS = 5_000;

/** Every metric name the node exports: the dashboard and alert-rule tests check their PromQL against this list. */
export const NODE_METRIC_NAMES = {
  buildInfo: 'vpc_lease_build_info',
  cniRequests: 'vpc_lease_cni_requests_total',
  cniDuration: 'vpc_lease_cni_request_duration_seconds',
  fallbackExecutions: 'vpc_lease_fallback_executions_total',
  storeDuration: 'vpc_lease_store_request_duration_seconds',
  storeErrors: 'vpc_lease_store_errors_total',
  credentialRefreshes: 'vpc_lease_credential_refreshes_total',
  leases: 'vpc_lease_node_leases',
  claimableLeases: 'vpc_lease_node_claimable_leases',
  leasesReadTime: 'vpc_lease_node_leases_read_timestamp_seconds',
  eventLoopDelay: 'vpc_lease_agent_event_loop_delay_seconds',
  residentMemory: 'process_resident_memory_bytes',
  startTime: 'process_start_time_seconds',
} as const;

const N = NODE_METRIC_NAMES;

/** How often the agent's event-loop sampler asks to run: its delay is how late it ran. */
export const EVENT_LOOP_SAMPLE_MS = 10;
/** Fine at the low end: a call's synchronous work should hold the loop for a few ms at most. */
const EVENT_LOOP_BUCKETS_S = [0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1, 0.25, 1];

/** An error as a bounded label value: the DynamoDB error type, a socket errno, or the error's name. */
export function errorLabel(err: unknown): string {
  const e = err as { code?: unknown; name?: unknown } | undefined;
  const raw = typeof e?.code === 'string' ? e.code : typeof e?.name === 'string' ? e.name : 'Error';
  return raw.replace(/[^A-Za-z0-9_]/g, '_').slice(0, 64) || 'Error';
}

/**
 * The node agent's metrics (names in NODE_METRIC_NAMES). Leases by state are read from the store on scrape and
 * cached for `leasesMaxAgeMs`; a failed read drops the lease gauges instead of serving stale counts, and the
 * failure shows in the store error counter of the request that failed.
 */
export class NodeMetrics {
  readonly registry = new Registry();
  private readonly cniRequests = this.registry.counter(
    N.cniRequests,
    'CNI commands finished on this node, by command, result (success|error) and CNI error code (0 on success).',
    ['command', 'result', 'code'],
  );
  private readonly cniDuration = this.registry.histogram(
    N.cniDuration,
    'Time to run a CNI command, through the agent or in the fallback plugin (measured by whoever ran it).',
    ['command', 'path'],
  );
  private readonly fallbackExecutions = this.registry.counter(
    N.fallbackExecutions,
    'CNI commands the full plugin ran itself because the agent did not answer (read from its fallback records).',
    ['command'],
  );
  private readonly storeDuration = this.registry.histogram(
    N.storeDuration,
    'DynamoDB request latency from the agent, SDK-style retries included, by operation.',
    ['operation'],
  );
  private readonly storeErrors = this.registry.counter(
    N.storeErrors,
    'DynamoDB requests that failed, by operation and error (ConditionalCheckFailedException is a lost race).',
    ['operation', 'error'],
  );
  private readonly credentialRefreshes = this.registry.counter(
    N.credentialRefreshes,
    'Instance-role credential refreshes by the agent, by result (success|error).',
    ['result'],
  );
  private readonly leases = this.registry.gauge(N.leases, "This node's leases by state, from the store.", ['state']);
  private readonly claimable = this.registry.gauge(
    N.claimableLeases,
    'Leases of this node an ADD could claim now (FREE, or COOLDOWN past reusableAt).',
  );
  private readonly leasesReadTime = this.registry.gauge(
    N.leasesReadTime,
    'When the lease gauges were last read from the store (Unix seconds).',
  );
  private readonly eventLoopDelay = this.registry.histogram(
    N.eventLoopDelay,
    `How late a timer due every ${EVENT_LOOP_SAMPLE_MS} ms ran in the agent: how long synchronous work held its one thread.`,
    [],
    EVENT_LOOP_BUCKETS_S,
  );
  private leasesReadAtMs: number | undefined;
  /** The read in progress: concurrent scrapes share it instead of each starting a Query. */
  private leasesReading: Promise<void> | undefined;
  /** After a failure: no read before this, and the wait doubles with each failure in a row. */
  private leasesRetryAtMs = 0;
  private leasesRetryMs = 0;
  private readLeases: (() => Promise<readonly Lease[]>) | undefined;
  private fallbackDataDir: string | undefined;

  constructor(private readonly options: NodeMetricsOptions) {
    this.readLeases = options.readLeases;
    this.fallbackDataDir = options.fallbackDataDir;
    this.registry
      .gauge(N.buildInfo, 'The running vpc-lease build (value 1).', ['version', 'runtime', 'arch'])
      .set({ version: options.version, runtime: process.version, arch: process.arch }, 1);
    const rss = this.registry.gauge(N.residentMemory, 'Resident memory of this process in bytes.');
    this.registry
      .gauge(N.startTime, 'Start time of this process since the Unix epoch in seconds.')
      .set({}, Math.round((Date.now() - performance.now()) / 1000));
    this.registry.onCollect(() => rss.set({}, process.memoryUsage.rss()));
    this.registry.onCollect(() => this.refreshLeases());
    this.registry.onCollect(() => this.drainFallbacks());
    for (const result of ['success', 'error']) this.credentialRefreshes.touch({ result });
  }

  /** Starts observing the event loop's delay (an unref'd timer: it never keeps the agent alive); returns its stop. */
  sampleEventLoop(): () => void {
    let last = performance.now();
    const timer = setInterval(() => {
      const now = performance.now();
      this.eventLoopDelay.observe({}, Math.max(0, now - last - EVENT_LOOP_SAMPLE_MS) / 1000);
      last = now;
    }, EVENT_LOOP_SAMPLE_MS);
    timer.unref();
    return () => clearInterval(timer);
  }

  observeCommand(o: CommandObservation): void {
    const result = o.code === 0 ? 'success' : 'error';
    this.cniRequests.inc({ command: o.command, result, code: String(o.code) });
    this.cniDuration.observe({ command: o.command, path: o.path }, o.durationS);
    if (o.path === 'fallback') this.fallbackExecutions.inc({ command: o.command });
  }

  /** Fits observeDynamo's observer: `metrics.observeStoreRequest` wraps the node's DynamoDB client. */
  readonly observeStoreRequest = (operation: string, durationS: number, err?: unknown): void => {
    this.storeDuration.observe({ operation }, durationS);
    if (err !== undefined) this.storeErrors.inc({ operation, error: errorLabel(err) });
  };

  observeCredentialRefresh(ok: boolean): void {
    this.credentialRefreshes.inc({ result: ok ? 'success' : 'error' });
  }

  /** The agent learns its node and dataDir from the first request's netconf and identity. */
  setLeaseSource(read: () => Promise<readonly Lease[]>): void {
    if (this.readLeases !== read) {
      this.leasesReadAtMs = undefined;
      this.leasesRetryAtMs = 0;
      this.leasesRetryMs = 0;
    }
    this.readLeases = read;
  }

  setFallbackDataDir(dataDir: string): void {
    this.fallbackDataDir = dataDir;
  }

  private drainFallbacks(): void {
    if (this.fallbackDataDir === undefined) return;
    try {
      for (const o of drainFallbackRecords(this.fallbackDataDir, this.options.nowMs())) this.observeCommand(o);
    } catch (err) {
      this.options.log?.warn('metrics: cannot read the fallback records', { error: errorMessage(err) });
    }
  }

  private refreshLeases(): Promise<void> {
    const read = this.readLeases;
    if (!read) return Promise.resolve();
    const nowMs = this.options.nowMs();
    const maxAgeMs = this.options.leasesMaxAgeMs ?? DEFAULT_LEASES_MAX_AGE_MS;
    if (this.leasesReadAtMs !== undefined && nowMs - this.leasesReadAtMs < maxAgeMs) return Promise.resolve();
    if (nowMs < this.leasesRetryAtMs) return Promise.resolve();
    this.leasesReading ??= this.readLeasesOnce(read, nowMs, maxAgeMs).finally(() => {
      this.leasesReading = undefined;
    });
    return this.leasesReading;
  }

  private async readLeasesOnce(read: () => Promise<readonly Lease[]>, nowMs: number, maxAgeMs: number): Promise<void> {
    try {
      const all = await read();
      for (const state of LEASE_STATES) this.leases.set({ state }, all.filter((l) => l.state === state).length);
      this.claimable.set({}, all.filter((l) => isClaimable(l, nowMs)).length);
      this.leasesReadTime.set({}, nowMs / 1000);
      this.leasesReadAtMs = nowMs;
      this.leasesRetryMs = 0;
    } catch (err) {
      this.leases.clear();
      this.claimable.clear();
      this.leasesReadAtMs = undefined;
      // A store that is down is not asked again on every scrape of every scraper.
      this.leasesRetryMs = Math.min(Math.max(LEASES_RETRY_MIN_MS, this.leasesRetryMs * 2), maxAgeMs);
      this.leasesRetryAtMs = nowMs + this.leasesRetryMs;
      this.options.log?.warn('metrics: cannot read this node’s leases', {
        error: errorMessage(err),
        retryInMs: this.leasesRetryMs,
      });
    }
  }
}
