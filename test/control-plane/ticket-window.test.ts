import { describe, expect, it } from 'vitest';
import { Ec2ApiError } from '../../local-cloud/ec2/errors.js';
import { TokenBuckets } from '../../local-cloud/ec2/throttle.js';
import { Timeline } from '../../local-cloud/ec2/timeline.js';
import { ManualClock } from '../../shared/clock.js';
import { ec2BucketRates } from '../../shared/ec2/budgeted-ec2.js';
import {
  declareEc2Calls,
  type HeldTicket,
  heldEc2Tickets,
  withEc2CallContext,
} from '../../shared/ec2/ec2-call-context.js';
import type { BucketRate } from '../../shared/ec2/gcra.js';
import { RateBudget, RateBudgetDeferral } from '../../shared/ec2/rate-budget.js';
import { MemoryRateBudgetStore } from '../support/memory-rate-budget-store.js';

/**
 * How late a launch may spend the ticket it was deferred with, checked against the simulator's own token bucket
 * (EC2's rule): every launch is deferred to its turn and comes back late by a seeded amount, as a busy Lambda
 * pool brings SQS messages back; a call goes to EC2 1 ms after the budget lets it, and every
 * RequestLimitExceeded is counted.
 */
const ATTACH = 'AttachNetworkInterface';
const T0 = Date.UTC(2026, 0, 1);

interface Wave {
  readonly launches: number;
  readonly fromMs: number;
  readonly spreadMs: number;
  /** Each pickup after a deferral comes back this much after the deferral's time (uniform, seeded). */
  readonly lateMs: readonly [min: number, max: number];
}

interface RunOptions {
  readonly ec2: BucketRate;
  readonly budgetRate: BucketRate;
  readonly waves: readonly Wave[];
  readonly ticketGraceTokens?: number;
  /** Rewrites the tickets a deferred launch carries (a marker from before the window, a forged one). */
  readonly carry?: (tickets: Record<string, HeldTicket[]>) => Record<string, HeldTicket[]>;
}

/** Park–Miller: the same lateness on every run and machine. */
function seeded(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s * 48_271) % 2_147_483_647;
    return s / 2_147_483_647;
  };
}

async function scaleOut(options: RunOptions) {
  const clock = new ManualClock(T0);
  const ec2 = new TokenBuckets(
    { buckets: { [ATTACH]: options.ec2 }, otherMutating: options.ec2 },
    new Timeline(1, () => clock.nowMs()),
    true,
  );
  const budget = new RateBudget({
    store: new MemoryRateBudgetStore(),
    clock,
    rateOf: () => options.budgetRate,
    // The invocation's bound is its pickup: a turn not come yet is a deferral, as with a busy function.
    ticketWaitMs: 0,
    ...(options.ticketGraceTokens !== undefined ? { ticketGraceTokens: options.ticketGraceTokens } : {}),
    sleep: async () => {},
  });
  const random = seeded(42);
  const events: { atMs: number; seq: number; run: () => Promise<void> }[] = [];
  let seq = 0;
  const at = (atMs: number, run: () => Promise<void>) => {
    events.push({ atMs, seq: seq++, run });
    events.sort((a, b) => a.atMs - b.atMs || a.seq - b.seq);
  };
  const result = { attached: 0, requestLimitExceeded: 0, pickups: 0, lastAttachMs: 0 };

  const callEc2 = async () => {
    try {
      ec2.take(ATTACH);
      result.attached += 1;
      result.lastAttachMs = clock.nowMs() - T0;
    } catch (err) {
      if (!(err instanceof Ec2ApiError) || err.code !== 'RequestLimitExceeded') throw err;
      result.requestLimitExceeded += 1;
    }
  };
  const lateness = ({ lateMs: [min, max] }: Wave) => min + Math.floor(random() * (max - min));
  const pickup = async (wave: Wave, arrivalMs: number, tickets?: Record<string, HeldTicket[]>) => {
    result.pickups += 1;
    const nowMs = clock.nowMs();
    const outcome = await withEc2CallContext(
      { arrivalMs, deadlineMs: nowMs, ...(tickets ? { tickets } : {}) },
      async () => {
        if (!tickets) declareEc2Calls({ [ATTACH]: 1 });
        try {
          return { startMs: await budget.acquire(ATTACH, ATTACH) };
        } catch (err) {
          if (!(err instanceof RateBudgetDeferral)) throw err;
          return { retryAfterMs: err.retryAfterMs, held: heldEc2Tickets() };
        }
      },
    );
    if (outcome.startMs !== undefined) {
      at(Math.max(outcome.startMs, nowMs) + 1, callEc2);
      return;
    }
    const carried = outcome.held && (options.carry ? options.carry(outcome.held) : outcome.held);
    at(nowMs + outcome.retryAfterMs + lateness(wave), () => pickup(wave, arrivalMs, carried));
  };

  for (const wave of options.waves)
    for (let i = 0; i < wave.launches; i += 1) {
      const arrivalMs = T0 + wave.fromMs + Math.floor((i * wave.spreadMs) / wave.launches);
      at(arrivalMs, () => pickup(wave, arrivalMs));
    }
  for (let event = events.shift(), n = 0; event; event = events.shift(), n += 1) {
    if (n > 100_000)
      throw new Error(
        `runaway: ${JSON.stringify({ ...result, pending: events.length, atS: (event.atMs - T0) / 1000 })}`,
      );
    clock.advance(event.atMs - clock.nowMs());
    await event.run();
  }
  return { ...result, ticketsExpired: budget.stats.ticketsExpired, ticketsUsed: budget.stats.ticketsUsed };
}

/** EC2's bucket exactly as the budget sees it, and no grace: only the window covers lateness. */
const EXACT: BucketRate = { bucket: 100, refillPerSecond: 10, heldBackTokens: 0 };
const exact = { ec2: EXACT, budgetRate: EXACT, ticketGraceTokens: 0 };
/** A wave that drains, an idle bucket refilled to full, then a second wave that takes all of it at once. */
const FIRST_WAVE: Wave = { launches: 300, fromMs: 0, spreadMs: 2_000, lateMs: [0, 9_800] };
/**
 * The first wave's queue runs ~21 s and some of it comes back 30–40 s late, into a second wave that arrives at
 * once at 40 s on a refilled bucket and is punctual (a late second wave would leave tokens behind that hide an
 * overdraw).
 */
const TWO_WAVES: readonly Wave[] = [
  { ...FIRST_WAVE, lateMs: [0, 40_000] },
  { launches: 300, fromMs: 40_000, spreadMs: 0, lateMs: [0, 0] },
];

describe('A held ticket spent late, against the simulator token bucket', () => {
  it('is spent within its window without overdrawing EC2, with no part of the burst held back', async () => {
    // The queue runs ~21 s; a queued token stays in EC2's bucket for (bucket − 1) intervals: 9.9 s.
    const run = await scaleOut({ ...exact, waves: [FIRST_WAVE] });
    expect(run.requestLimitExceeded).toBe(0);
    expect(run.attached).toBe(300);
    expect(run.ticketsExpired).toBe(0);
    expect(run.ticketsUsed).toBe(300);
  });

  it('is dropped once the queue behind it has drained and EC2 refilled, so a second burst is not overdrawn', async () => {
    const run = await scaleOut({ ...exact, waves: TWO_WAVES });
    expect(run.requestLimitExceeded).toBe(0);
    expect(run.attached).toBe(600);
    expect(run.ticketsExpired).toBeGreaterThan(0);
  });

  it('negative control: with no window (a grace longer than the run) the late tickets overdraw the second burst', async () => {
    const run = await scaleOut({ ...exact, ticketGraceTokens: 1_000_000, waves: TWO_WAVES });
    expect(run.ticketsExpired).toBe(0);
    expect(run.requestLimitExceeded).toBeGreaterThan(0);
  });

  it('caps a carried window at a full bucket after its start: a forged one cannot overdraw either', async () => {
    const forged = (tickets: Record<string, HeldTicket[]>) =>
      Object.fromEntries(Object.entries(tickets).map(([k, v]) => [k, v.map(([s]): HeldTicket => [s, s + 3_600_000])]));
    const run = await scaleOut({ ...exact, waves: TWO_WAVES, carry: forged });
    expect(run.requestLimitExceeded).toBe(0);
    expect(run.attached).toBe(600);
  });

  it('at a doubled account bucket, spends late tickets the held-back grace alone would drop, and finishes sooner', async () => {
    // The budget's figure for a doubled Attach (100 at 10/s): 80 handed out, 20 held back, a 2 s grace.
    const doubled = { bucket: 100, refillPerSecond: 10 };
    const production = { ec2: doubled, budgetRate: ec2BucketRates({}, { [ATTACH]: doubled })(ATTACH) };
    const waves: Wave[] = [{ launches: 600, fromMs: 0, spreadMs: 5_000, lateMs: [0, 7_000] }];
    const window = await scaleOut({ ...production, waves });
    // Tickets as markers carried them before the window: a start time only.
    const startsOnly = (tickets: Record<string, HeldTicket[]>) =>
      Object.fromEntries(Object.entries(tickets).map(([k, v]) => [k, v.map(([s]): HeldTicket => [s, s])]));
    const graceOnly = await scaleOut({ ...production, waves, carry: startsOnly });
    for (const run of [window, graceOnly]) {
      expect(run.requestLimitExceeded).toBe(0);
      expect(run.attached).toBe(600);
    }
    expect(window.ticketsExpired).toBe(0);
    expect(graceOnly.ticketsExpired).toBeGreaterThan(100);
    expect(window.pickups).toBeLessThan(graceOnly.pickups);
    expect(window.lastAttachMs).toBeLessThan(graceOnly.lastAttachMs);
  });
});
