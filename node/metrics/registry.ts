import { ValidationError } from '../../shared/errors.js';

/**
 * A small Prometheus registry: counters, gauges and histograms with labels, rendered by exposition.ts. No client
 * library: the node executable carries no npm dependency it can do without, and the agent needs only these three
 * types. Label sets are checked on every update, so a typo fails at the call instead of making a new series.
 */
export type Labels = Readonly<Record<string, string>>;
export type MetricType = 'counter' | 'gauge' | 'histogram';

export interface Sample {
  /** The family name plus a suffix (`_bucket`, `_sum`, `_count`) for histograms. */
  readonly name: string;
  readonly labels: Labels;
  readonly value: number;
}

export interface MetricFamily {
  readonly name: string;
  readonly help: string;
  readonly type: MetricType;
  samples(): Sample[];
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** Prometheus's client default buckets, in seconds: CNI calls and store round trips both fall inside them. */
export const DEFAULT_BUCKETS_S = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] as const;

function checkNames(name: string, labelNames: readonly string[]): void {
  if (!METRIC_NAME.test(name)) throw new ValidationError(`invalid metric name ${JSON.stringify(name)}`);
  for (const label of labelNames)
    if (!LABEL_NAME.test(label) || label.startsWith('__') || label === 'le')
      throw new ValidationError(`invalid label name ${JSON.stringify(label)} on ${name}`);
}

/** The series key of a label set, after checking it names exactly the family's labels. */
function seriesKey(name: string, labelNames: readonly string[], labels: Labels): string {
  const given = Object.keys(labels);
  if (given.length !== labelNames.length || labelNames.some((l) => typeof labels[l] !== 'string'))
    throw new ValidationError(`${name} takes labels {${labelNames.join(',')}}, got {${given.join(',')}}`);
  return JSON.stringify(labelNames.map((l) => labels[l]));
}

abstract class Family<T> implements MetricFamily {
  protected readonly series = new Map<string, { labels: Labels; state: T }>();
  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly string[],
  ) {
    checkNames(name, labelNames);
  }
  abstract readonly type: MetricType;
  abstract samples(): Sample[];
  protected entry(labels: Labels, init: () => T): { labels: Labels; state: T } {
    const key = seriesKey(this.name, this.labelNames, labels);
    let found = this.series.get(key);
    if (!found) {
      found = { labels: { ...labels }, state: init() };
      this.series.set(key, found);
    }
    return found;
  }
}

export class Counter extends Family<{ value: number }> {
  readonly type = 'counter';
  inc(labels: Labels = {}, by = 1): void {
    if (!(by >= 0)) throw new ValidationError(`${this.name}: a counter only goes up (got ${by})`);
    this.entry(labels, () => ({ value: 0 })).state.value += by;
  }
  /** Shows a series at 0 before its first event, so `rate()` and alerts see a start instead of absence. */
  touch(labels: Labels = {}): void {
    this.entry(labels, () => ({ value: 0 }));
  }
  samples(): Sample[] {
    return [...this.series.values()].map((s) => ({ name: this.name, labels: s.labels, value: s.state.value }));
  }
}

export class Gauge extends Family<{ value: number }> {
  readonly type = 'gauge';
  set(labels: Labels, value: number): void {
    this.entry(labels, () => ({ value: 0 })).state.value = value;
  }
  /** Drops every series (a gauge whose source could not be read shows nothing rather than stale values). */
  clear(): void {
    this.series.clear();
  }
  samples(): Sample[] {
    return [...this.series.values()].map((s) => ({ name: this.name, labels: s.labels, value: s.state.value }));
  }
}

interface HistogramState {
  readonly counts: number[];
  sum: number;
  count: number;
}

export class Histogram extends Family<HistogramState> {
  readonly type = 'histogram';
  readonly bucketsS: readonly number[];
  constructor(name: string, help: string, labelNames: readonly string[], buckets: readonly number[]) {
    super(name, help, labelNames);
    if (buckets.length === 0 || buckets.some((b, i) => !Number.isFinite(b) || (i > 0 && b <= buckets[i - 1]!)))
      throw new ValidationError(`${name}: buckets must be finite and strictly increasing`);
    this.bucketsS = [...buckets];
  }
  observe(labels: Labels, value: number): void {
    if (Number.isNaN(value)) throw new ValidationError(`${this.name}: cannot observe NaN`);
    const { state } = this.entry(labels, () => ({ counts: this.bucketsS.map(() => 0), sum: 0, count: 0 }));
    const index = this.bucketsS.findIndex((b) => value <= b);
    if (index >= 0) state.counts[index]! += 1;
    state.sum += value;
    state.count += 1;
  }
  samples(): Sample[] {
    const out: Sample[] = [];
    for (const { labels, state } of this.series.values()) {
      let cumulative = 0;
      this.bucketsS.forEach((bound, i) => {
        cumulative += state.counts[i]!;
        out.push({ name: `${this.name}_bucket`, labels: { ...labels, le: formatValue(bound) }, value: cumulative });
      });
      out.push({ name: `${this.name}_bucket`, labels: { ...labels, le: '+Inf' }, value: state.count });
      out.push({ name: `${this.name}_sum`, labels, value: state.sum });
      out.push({ name: `${this.name}_count`, labels, value: state.count });
    }
    return out;
  }
}

/** A sample value as the text format writes it (Go's ParseFloat reads `+Inf`, `-Inf`, `NaN`). */
export function formatValue(value: number): string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Number.POSITIVE_INFINITY) return '+Inf';
  if (value === Number.NEGATIVE_INFINITY) return '-Inf';
  return String(value);
}

/**
 * The families of one process, in registration order, plus collectors run before each render (values read on
 * scrape, such as leases by state). A collector that throws leaves its families as it left them.
 */
export class Registry {
  private readonly families = new Map<string, MetricFamily>();
  private readonly collectors: (() => Promise<void> | void)[] = [];

  counter(name: string, help: string, labelNames: readonly string[] = []): Counter {
    return this.add(new Counter(name, help, labelNames));
  }
  gauge(name: string, help: string, labelNames: readonly string[] = []): Gauge {
    return this.add(new Gauge(name, help, labelNames));
  }
  histogram(
    name: string,
    help: string,
    labelNames: readonly string[] = [],
    buckets: readonly number[] = DEFAULT_BUCKETS_S,
  ): Histogram {
    return this.add(new Histogram(name, help, labelNames, buckets));
  }
  onCollect(collect: () => Promise<void> | void): void {
    this.collectors.push(collect);
  }
  /** Runs the collectors, then returns every family. */
  async collect(): Promise<MetricFamily[]> {
    await Promise.allSettled(this.collectors.map(async (c) => c()));
    return [...this.families.values()];
  }
  names(): string[] {
    return [...this.families.keys()];
  }
  private add<T extends MetricFamily>(family: T): T {
    if (this.families.has(family.name)) throw new ValidationError(`metric ${family.name} registered twice`);
    this.families.set(family.name, family);
    return family;
  }
}
