import { AsyncLocalStorage } from 'node:async_hooks';
import type { Clock } from '../clock.js';
import { errorMessage } from '../errors.js';
import type { Logger } from '../log.js';
import { Ec2ApiError } from './errors.js';

/**
 * One EC2 rate budget per account and Region, shared by every Lambda: calls are scheduled into EC2's request
 * token buckets instead of retried against them. The shared state per bucket is one number, the GCRA
 * "theoretical arrival time" `tatMs` (when the bucket would be full again if nobody took more): taking n
 * tokens moves it to max(tat, now) + n·interval, and the k-th of them may be sent once the bucket holds it,
 * at max(now, tat_k − capacity·interval). A reservation is therefore one atomic add on the stored time, so
 * concurrent takers never read-modify-write each other; a caller then sleeps until its token's start.
 */
export interface BucketRate {
  /** Tokens the bucket holds when full. */
  readonly bucket: number;
  readonly refillPerSecond: number;
}

export type TakeResult =
  /** `count` tokens are reserved; the stored time before them was `baseMs` (≥ the request's now). */
  | { readonly kind: 'granted'; readonly baseMs: number }
  /** The last token would start later than allowed; nothing was taken. `tatMs` is the stored time seen. */
  | { readonly kind: 'short'; readonly tatMs: number };

/** Where the budget's bucket times live: memory for tests, the lease table for the Lambdas. */
export interface RateBudgetStore {
  /**
   * Takes `count` tokens of bucket `key` at `nowMs`, unless the last of them would start after
   * `latestStartMs` (then nothing is taken).
   */
  take(key: string, count: number, rate: BucketRate, nowMs: number, latestStartMs: number): Promise<TakeResult>;
}

export function intervalMs(rate: BucketRate): number {
  return 1000 / rate.refillPerSecond;
}

/** When the k-th (1-based) of the tokens taken after `baseMs` may be sent. */
export function tokenStartMs(rate: BucketRate, baseMs: number, k: number, nowMs: number): number {
  const step = intervalMs(rate);
  return Math.max(nowMs, baseMs + k * step - rate.bucket * step);
}

/** How many tokens fit before `latestStartMs` given the stored time `tatMs` (0 when none does). */
export function tokensThatFit(rate: BucketRate, tatMs: number, nowMs: number, latestStartMs: number): number {
  const step = intervalMs(rate);
  const base = Math.max(tatMs, nowMs);
  return Math.max(0, Math.floor((latestStartMs - base) / step + rate.bucket));
}

/** The stored time after a take: the shared arithmetic of every store. */
export function tatAfter(rate: BucketRate, tatMs: number | undefined, count: number, nowMs: number): number {
  return Math.max(tatMs ?? nowMs, nowMs) + count * intervalMs(rate);
}

/** The budget in one process (tests, the CLI's local runs): the same arithmetic as the DynamoDB store. */
export class MemoryRateBudgetStore implements RateBudgetStore {
  private readonly tats = new Map<string, number>();
  /** Takes served, for tests that count store round trips. */
  takes = 0;

  async take(key: string, count: number, rate: BucketRate, nowMs: number, latestStartMs: number): Promise<TakeResult> {
    this.takes += 1;
    const tat = this.tats.get(key);
    const base = Math.max(tat ?? nowMs, nowMs);
    if (tokenStartMs(rate, base, count, nowMs) > latestStartMs) return { kind: 'short', tatMs: base };
    this.tats.set(key, tatAfter(rate, tat, count, nowMs));
    return { kind: 'granted', baseMs: base };
  }
}

/** What an EC2 call waits for: which launch it serves (for arrival order) and until when it may wait. */
export interface Ec2CallContext {
  /** When the work arrived (the event's `time`): earlier arrivals get the next tokens first. */
  readonly arrivalMs: number;
  /** Past this, a call that would still have to wait is deferred instead (the invocation's own bound). */
  readonly deadlineMs?: number;
}

const callContext = new AsyncLocalStorage<Ec2CallContext>();

/** Runs `work` with its EC2 calls ordered by `context.arrivalMs` and bounded by its deadline. */
export function withEc2CallContext<T>(context: Ec2CallContext, work: () => Promise<T>): Promise<T> {
  return callContext.run(context, work);
}

/**
 * A call whose token would start past its bound: the caller re-enqueues the work (with a lifecycle
 * heartbeat) for `retryAfterMs` instead of sleeping inside the function. Classified as throttling, so every
 * path that already handles RequestLimitExceeded handles it too.
 */
export class RateBudgetDeferral extends Ec2ApiError {
  constructor(
    action: string,
    readonly retryAfterMs: number,
  ) {
    super(
      action,
      'VpcLeaseRateBudget',
      'throttling',
      `EC2 ${action}: the account's rate budget has no token within the wait bound; next in ~${Math.ceil(retryAfterMs / 1000)} s`,
    );
  }
}

export interface RateBudgetOptions {
  readonly store: RateBudgetStore;
  readonly clock: Clock;
  /** Bucket figures by key; `rateOf` picks the figure of a key. */
  readonly rateOf: (key: string) => BucketRate;
  /** The longest a call sleeps for its token when its context has no deadline (default 10 s). */
  readonly maxWaitMs?: number;
  readonly sleep?: (ms: number) => Promise<void>;
  readonly logger?: Logger;
  /** Takers served by one store round trip at most (default 16). */
  readonly maxBatch?: number;
}

interface Taker {
  readonly arrivalMs: number;
  readonly latestStartMs: number;
  readonly seq: number;
  resolve(startMs: number | 'short' | 'failed'): void;
}

const realSleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The budget as one process uses it: takers of a bucket queue here in arrival order and are served by one
 * store round trip per batch (several tokens at once), one round trip at a time per bucket, so a container
 * never races itself on the stored time and the oldest launch always gets the earliest token.
 *
 * Fails open: when the store cannot be reached the call goes straight to EC2, whose own buckets still hold
 * (the SDK's adaptive retry handles their answers); the budget only spares calls, it never blocks them.
 */
export class RateBudget {
  private readonly queues = new Map<string, Taker[]>();
  private readonly pumping = new Set<string>();
  private seq = 0;
  readonly stats = { granted: 0, deferred: 0, failedOpen: 0, storeTakes: 0, sleptMs: 0 };

  constructor(private readonly options: RateBudgetOptions) {}

  /**
   * Waits for one token of `key` (sleeping up to the bound) or throws RateBudgetDeferral. Resolves with the
   * time the token was scheduled for (the clock's now when the store could not be reached).
   */
  async acquire(key: string, action: string): Promise<number> {
    const { clock } = this.options;
    const context = callContext.getStore();
    const nowMs = clock.nowMs();
    const latestStartMs = context?.deadlineMs ?? nowMs + (this.options.maxWaitMs ?? 10_000);
    const start = await new Promise<number | 'short' | 'failed'>((resolve) => {
      const taker: Taker = { arrivalMs: context?.arrivalMs ?? nowMs, latestStartMs, seq: this.seq++, resolve };
      this.enqueue(key, taker);
    });
    if (start === 'failed') {
      this.stats.failedOpen += 1;
      return clock.nowMs();
    }
    if (start === 'short') {
      this.stats.deferred += 1;
      const rate = this.options.rateOf(key);
      throw new RateBudgetDeferral(action, Math.max(intervalMs(rate), this.shortWaitMs(key)));
    }
    this.stats.granted += 1;
    const waitMs = start - clock.nowMs();
    if (waitMs > 0) {
      this.stats.sleptMs += waitMs;
      await (this.options.sleep ?? realSleep)(waitMs);
    }
    return start;
  }

  private readonly lastShortWaitMs = new Map<string, number>();
  private shortWaitMs(key: string): number {
    return this.lastShortWaitMs.get(key) ?? 1000;
  }

  private enqueue(key: string, taker: Taker): void {
    const queue = this.queues.get(key) ?? [];
    // Oldest arrival first; equal arrivals in call order.
    let i = queue.length;
    while (
      i > 0 &&
      (queue[i - 1]!.arrivalMs > taker.arrivalMs ||
        (queue[i - 1]!.arrivalMs === taker.arrivalMs && queue[i - 1]!.seq > taker.seq))
    )
      i -= 1;
    queue.splice(i, 0, taker);
    this.queues.set(key, queue);
    if (!this.pumping.has(key)) void this.pump(key);
  }

  private async pump(key: string): Promise<void> {
    this.pumping.add(key);
    try {
      // Let every taker of this tick join the queue first, so the first round trip already sees them in order.
      await Promise.resolve();
      const rate = this.options.rateOf(key);
      for (;;) {
        const queue = this.queues.get(key) ?? [];
        if (queue.length === 0) return;
        const batch = queue.splice(0, this.options.maxBatch ?? 16);
        await this.serve(key, rate, batch);
      }
    } finally {
      this.pumping.delete(key);
    }
  }

  /** One store round trip for `batch` (arrival order); the ones that do not fit are told they are short. */
  private async serve(key: string, rate: BucketRate, batch: Taker[]): Promise<void> {
    const { store, clock } = this.options;
    let pending = batch;
    // Two rounds: all of them, then as many as fit given what the first round saw.
    for (let round = 0; round < 2 && pending.length > 0; round += 1) {
      const nowMs = clock.nowMs();
      // The batch is granted only if its last taker's token starts in time for the strictest of them.
      const latest = Math.min(...pending.map((t) => t.latestStartMs));
      let result: TakeResult;
      try {
        this.stats.storeTakes += 1;
        result = await store.take(key, pending.length, rate, nowMs, latest);
      } catch (err) {
        this.options.logger?.warn('EC2 rate budget unreachable; calling EC2 without it', {
          bucket: key,
          err: errorMessage(err),
        });
        for (const t of pending) t.resolve('failed');
        return;
      }
      if (result.kind === 'granted') {
        for (const [i, t] of pending.entries()) t.resolve(tokenStartMs(rate, result.baseMs, i + 1, nowMs));
        return;
      }
      const fit = tokensThatFit(rate, result.tatMs, nowMs, latest);
      this.lastShortWaitMs.set(key, tokenStartMs(rate, result.tatMs, 1, nowMs) - nowMs);
      if (fit <= 0 || round === 1) break;
      // Serve the oldest ones that fit; the rest are short now (their bound is what it is).
      const later = pending.slice(Math.min(fit, pending.length - 1));
      pending = pending.slice(0, Math.min(fit, pending.length - 1));
      for (const t of later) t.resolve('short');
    }
    for (const t of pending) t.resolve('short');
  }
}
