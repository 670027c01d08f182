import type { BucketSpec, ThrottlingTable } from '../../shared/data/catalog.js';
import { Ec2ApiError } from './errors.js';
import type { Timeline } from './timeline.js';

export const DESCRIBE_ENIS_UNPAGINATED = 'DescribeNetworkInterfaces (unfiltered or unpaginated)';

/**
 * EC2's request token buckets, one per action (per account and region in AWS): a request takes one token, an
 * empty bucket answers `RequestLimitExceeded`, and tokens come back at the refill rate — in AWS seconds, so a
 * timeScale of 0.01 refills a hundred times faster in real time and 0 refills instantly (throttling never
 * bites). Which figure applies: the action's own row, else `Describe*` for Describe actions, else the
 * "other mutating actions" row; DescribeNetworkInterfaces without filters/ids or without MaxResults uses its
 * own smaller bucket, as the EC2 guide lists it.
 */
export class TokenBuckets {
  private readonly overrides = new Map<string, BucketSpec>();
  private readonly state = new Map<string, { tokens: number; atMs: number; spec: BucketSpec }>();
  enabled: boolean;

  constructor(
    private readonly table: ThrottlingTable,
    private readonly timeline: Timeline,
    enabled: boolean,
  ) {
    this.enabled = enabled;
  }

  /** The bucket key a request draws from. */
  keyFor(action: string, input: Record<string, unknown>): string {
    if (action === 'DescribeNetworkInterfaces') {
      const filtered = Array.isArray(input['Filters']) || Array.isArray(input['NetworkInterfaceIds']);
      const paginated = input['MaxResults'] !== undefined;
      if (!filtered || !paginated) return DESCRIBE_ENIS_UNPAGINATED;
    }
    return action;
  }

  specFor(key: string): BucketSpec {
    const override =
      this.overrides.get(key) ?? (key.startsWith('Describe') ? this.overrides.get('Describe*') : undefined);
    if (override) return override;
    const own = this.table.buckets[key];
    if (own) return own;
    if (key.startsWith('Describe')) return this.table.buckets['Describe*'] ?? this.table.otherMutating;
    return this.table.otherMutating;
  }

  /** Overrides a bucket (an action name, `Describe*`, or the DescribeNetworkInterfaces key); refills it. */
  setBucket(key: string, spec: BucketSpec): void {
    this.overrides.set(key, spec);
    for (const k of [...this.state.keys()])
      if (k === key || (key === 'Describe*' && k.startsWith('Describe'))) this.state.delete(k);
  }

  /** Takes a token or throws RequestLimitExceeded. */
  take(key: string): void {
    if (!this.enabled) return;
    const nowMs = this.timeline.nowMs();
    const spec = this.specFor(key);
    let entry = this.state.get(key);
    if (!entry || entry.spec !== spec) {
      entry = { tokens: spec.bucket, atMs: nowMs, spec };
      this.state.set(key, entry);
    }
    const scale = this.timeline.timeScale;
    if (scale <= 0) {
      entry.tokens = spec.bucket;
    } else if (spec.refillPerSecond > 0) {
      const refilled = ((nowMs - entry.atMs) / 1000 / scale) * spec.refillPerSecond;
      entry.tokens = Math.min(spec.bucket, entry.tokens + refilled);
    }
    entry.atMs = nowMs;
    if (entry.tokens < 1) throw new Ec2ApiError('RequestLimitExceeded', 'Request limit exceeded.');
    entry.tokens -= 1;
  }

  /** Tokens left now (for tests and the admin view). */
  tokens(key: string): number {
    return this.state.get(key)?.tokens ?? this.specFor(key).bucket;
  }
}
