import type { Clock } from '../clock.js';
import { errorMessage } from '../errors.js';
import type { Logger } from '../log.js';
import { sleepMs } from '../sleep.js';
import { byStart, type CallState, currentCallState, type HeldTicket } from './ec2-call-context.js';
import { Ec2ApiError } from './errors.js';
import { type BucketRate, intervalMs, tokenStartMs, tokensThatFit } from './gcra.js';
import type { RateBudgetStore, TakeResult } from './rate-budget-store.js';

/**
 * One EC2 rate budget per account and Region, shared by every Lambda: calls are scheduled into EC2's request
 * token buckets instead of retried against them.
 * - The arithmetic (gcra.ts): one stored time per bucket; a take is one atomic add on it, and a token's start
 *   follows from it, so concurrent takers never read-modify-write each other.
 * - The store (rate-budget-store.ts): where those times live, the lease table for the Lambdas.
 * - The work's context (ec2-call-context.ts): arrival order, the invocation's bound, tickets held ahead.
 * - The scheduler (here): takers queue in arrival order, are served in batches by one store round trip, then
 *   sleep until their token's start, or are deferred (RateBudgetDeferral) when it starts past their bound.
 */

/**
 * A call whose token would start past its bound: the caller re-enqueues the work (with a lifecycle
 * heartbeat) for `retryAfterMs` instead of sleeping inside the function. Classified as throttling, so every
 * path that already handles RequestLimitExceeded handles it too. `retryAfterMs` is AWS time (the budget's
 * `rateScale`), as the queue that brings the work back counts its DelaySeconds.
 */
export class RateBudgetDeferral extends Ec2ApiError {
  constructor(
    action: string,
    readonly retryAfterMs: number,
    /** AWS ms past `retryAfterMs` the work may come back and still spend the ticket it holds (0: none held). */
    readonly lateOkMs = 0,
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
  /**
   * AWS seconds per second of `clock` (default 1): the factor `rateOf`'s refill rates carry, 1/timeScale on a
   * local cloud. A deferral's `retryAfterMs` is AWS time by it, so SQS brings the work back at its ticket at
   * any time scale; the clock's own times (tickets, deadlines) stay clock ms. The bounds below are AWS
   * durations stretched onto a slower clock, never shrunk on a faster one, whose store round trips still take
   * real time.
   */
  readonly rateScale?: number;
  /** The longest a call sleeps for its token when its context has no deadline (default 10 s). */
  readonly maxWaitMs?: number;
  readonly sleep?: (ms: number) => Promise<void>;
  readonly logger?: Logger;
  /** Takers served by one store round trip at most (default 16). */
  readonly maxBatch?: number;
  /** How far ahead declared calls may be reserved (default 15 min, SQS's longest message delay). */
  readonly maxReserveAheadMs?: number;
  /** How long a call sleeps for a ticket it holds, whatever the invocation's bound (default 4 s). */
  readonly ticketWaitMs?: number;
  /**
   * How late a ticket may still be used, in the bucket's refill intervals (default: the rate's
   * `heldBackTokens`, else 10): the part of EC2's burst the budget keeps back, so a little lateness never
   * overdraws EC2's bucket — a raised bucket keeps more back and so tolerates as much lateness in seconds as
   * the published one; in tokens, so a local cloud's faster refill shortens it alike.
   */
  readonly ticketGraceTokens?: number;
}

interface Taker {
  readonly arrivalMs: number;
  readonly latestStartMs: number;
  /** A reservation for later (served in its own round trips: a far bound must not share a near one's fate). */
  readonly reserve: boolean;
  readonly seq: number;
  resolve(grant: Grant | 'short' | 'failed'): void;
}

/** A token taken: its start, and the stored time right after it (the queue's end at that moment). */
interface Grant {
  readonly startMs: number;
  readonly tatMs: number;
}

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
  readonly stats = {
    granted: 0,
    deferred: 0,
    failedOpen: 0,
    storeTakes: 0,
    sleptMs: 0,
    reserved: 0,
    ticketsUsed: 0,
    ticketsExpired: 0,
    /** The latest a ticket was used after its time (ms): how far the re-enqueued launches came back late. */
    ticketLateMsMax: 0,
  };

  constructor(private readonly options: RateBudgetOptions) {}

  /**
   * Waits for one token of `key` (sleeping up to the bound) or throws RateBudgetDeferral. Resolves with the
   * time the token was scheduled for (the clock's now when the store could not be reached).
   */
  async acquire(key: string, action: string): Promise<number> {
    const { clock } = this.options;
    const state = currentCallState();
    const context = state?.context;
    if (state?.declared?.[key] !== undefined) await this.reserveDeclared(state);
    else if (state?.reserving) await state.reserving;
    if (state) this.dropLateTickets(state, key);
    const nowMs = clock.nowMs();
    const latestStartMs = context?.deadlineMs ?? nowMs + this.boundMs(this.options.maxWaitMs ?? 10_000);
    const held = state?.tickets.get(key);
    const ticket = held?.[0]?.[0];
    if (held && ticket !== undefined) {
      // A held turn is worth a short sleep even past the invocation's bound: deferring it would come back late.
      if (ticket > Math.max(latestStartMs, nowMs + this.boundMs(this.options.ticketWaitMs ?? 4_000))) {
        // Not its turn yet: the ticket stays held and the re-enqueued event carries it.
        this.stats.deferred += 1;
        const rate = this.options.rateOf(key);
        const lateOkMs = this.ticketUsableUntilMs(held[0]!, rate) - ticket;
        throw new RateBudgetDeferral(action, this.awsMs(ticket - nowMs), this.awsMs(lateOkMs));
      }
      held.shift();
      this.stats.ticketsUsed += 1;
      this.stats.ticketLateMsMax = Math.max(this.stats.ticketLateMsMax, nowMs - ticket);
      await this.sleepUntil(ticket);
      return ticket;
    }
    const grant = await this.queueTaker(key, { arrivalMs: context?.arrivalMs ?? nowMs, latestStartMs, reserve: false });
    if (grant === 'failed') {
      this.stats.failedOpen += 1;
      return clock.nowMs();
    }
    if (grant === 'short') {
      this.stats.deferred += 1;
      const rate = this.options.rateOf(key);
      throw new RateBudgetDeferral(action, this.awsMs(Math.max(intervalMs(rate), this.shortWaitMs(key))));
    }
    this.stats.granted += 1;
    await this.sleepUntil(grant.startMs);
    return grant.startMs;
  }

  /** One of the budget's bounds (an AWS duration) on its clock. */
  private boundMs(awsMs: number): number {
    return awsMs / Math.min(1, this.options.rateScale ?? 1);
  }

  /** A duration on the budget's clock in AWS time. */
  private awsMs(clockMs: number): number {
    return clockMs * (this.options.rateScale ?? 1);
  }

  private async sleepUntil(startMs: number): Promise<void> {
    const waitMs = startMs - this.options.clock.nowMs();
    if (waitMs <= 0) return;
    this.stats.sleptMs += waitMs;
    await (this.options.sleep ?? sleepMs)(waitMs);
  }

  /**
   * A ticket used after its window overdraws EC2's bucket (it refilled to full meanwhile and the surplus was
   * lost), so it is dropped: the call asks like any other, and the launch reserves again on its next pickup,
   * not at once (that let late launches push the buckets' time ever further ahead).
   */
  private dropLateTickets(state: CallState, key: string): void {
    const held = state.tickets.get(key);
    if (!held?.length) return;
    const rate = this.options.rateOf(key);
    const nowMs = this.options.clock.nowMs();
    const kept = held.filter((t) => nowMs <= this.ticketUsableUntilMs(t, rate));
    if (kept.length === held.length) return;
    this.stats.ticketsExpired += held.length - kept.length;
    state.tickets.set(key, kept);
  }

  /**
   * The latest a ticket may be sent: while the queue behind it kept EC2's bucket from filling (HeldTicket), at
   * most a full bucket's refill after its start whatever it carries, and never less than the grace.
   */
  private ticketUsableUntilMs([startMs, usableUntilMs]: HeldTicket, rate: BucketRate): number {
    const step = intervalMs(rate);
    const graceMs = (this.options.ticketGraceTokens ?? rate.heldBackTokens ?? 10) * step;
    const queuedMs = Math.min(usableUntilMs, startMs + (rate.bucket - 1) * step);
    return Math.max(startMs + graceMs, queuedMs);
  }

  private queueTaker(key: string, taker: Omit<Taker, 'seq' | 'resolve'>): Promise<Grant | 'short' | 'failed'> {
    return new Promise((resolve) => this.enqueue(key, { ...taker, seq: this.seq++, resolve }));
  }

  /**
   * Reserves every declared call of the work in one go (concurrent first calls share it). A token that cannot
   * be reserved (past the horizon, or the store unreachable) is simply not held: its call takes the usual path.
   */
  private reserveDeclared(state: CallState): Promise<void> {
    const declared = state.declared ?? {};
    state.declared = undefined;
    state.reserving = (async () => {
      const nowMs = this.options.clock.nowMs();
      const latestStartMs = nowMs + this.boundMs(this.options.maxReserveAheadMs ?? 15 * 60_000);
      const arrivalMs = state.context.arrivalMs;
      await Promise.all(
        Object.entries(declared).map(async ([key, count]) => {
          const step = intervalMs(this.options.rateOf(key));
          const grants = await Promise.all(
            Array.from({ length: count }, () => this.queueTaker(key, { arrivalMs, latestStartMs, reserve: true })),
          );
          const held = grants
            .filter((g): g is Grant => typeof g === 'object')
            .map((g): HeldTicket => [g.startMs, g.tatMs - step]);
          this.stats.reserved += held.length;
          state.tickets.set(key, [...(state.tickets.get(key) ?? []), ...held].sort(byStart));
        }),
      );
    })();
    return state.reserving;
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
        // Reservations and bounded takes go in separate round trips, in queue order.
        const kind = queue[0]!.reserve;
        let n = 1;
        while (n < Math.min(queue.length, this.options.maxBatch ?? 16) && queue[n]!.reserve === kind) n += 1;
        const batch = queue.splice(0, n);
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
        const step = intervalMs(rate);
        for (const [i, t] of pending.entries())
          t.resolve({
            startMs: tokenStartMs(rate, result.baseMs, i + 1, nowMs),
            tatMs: result.baseMs + (i + 1) * step,
          });
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
