/** Percentiles by nearest rank (no interpolation): every reported figure is a latency that was observed. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1]!;
}

export interface LatencySummary {
  readonly n: number;
  readonly p50Ms: number;
  readonly p90Ms: number;
  readonly p99Ms: number;
}

export function summarize(valuesMs: readonly number[]): LatencySummary {
  return {
    n: valuesMs.length,
    p50Ms: round(percentile(valuesMs, 50)),
    p90Ms: round(percentile(valuesMs, 90)),
    p99Ms: round(percentile(valuesMs, 99)),
  };
}

/** Two decimals: enough for ratios and milliseconds, short enough for one JSON line. */
export function round(value: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

export function ratio(numerator: number, denominator: number): number {
  return denominator > 0 ? round(numerator / denominator) : Number.NaN;
}

/** Milliseconds since `startNs` (process.hrtime.bigint()). */
export function elapsedMs(startNs: bigint): number {
  return Number(process.hrtime.bigint() - startNs) / 1e6;
}

/** A small seeded generator (mulberry32) so interleaving orders are reproducible from the printed seed. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function shuffle<T>(items: readonly T[], random: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}
