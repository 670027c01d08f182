import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { EC2Client } from '@aws-sdk/client-ec2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEc2Simulator } from '../../local-cloud/ec2/index.js';
import { ManualClock } from '../../shared/clock.js';
import { SdkDynamoApi } from '../../shared/dynamo/sdk-client.js';
import { BudgetedEc2, ec2BucketRates } from '../../shared/ec2/budgeted-ec2.js';
import { DynamoRateBudgetStore } from '../../shared/ec2/dynamo-rate-budget.js';
import {
  declareEc2Calls,
  type HeldTicket,
  heldEc2Tickets,
  withEc2CallContext,
} from '../../shared/ec2/ec2-call-context.js';
import { Ec2ApiError } from '../../shared/ec2/errors.js';
import type { BucketRate } from '../../shared/ec2/gcra.js';
import { RateBudget, RateBudgetDeferral } from '../../shared/ec2/rate-budget.js';
import type { RateBudgetStore } from '../../shared/ec2/rate-budget-store.js';
import { SdkEc2 } from '../../shared/ec2/sdk-ec2.js';
import { ensureTable } from '../../shared/lease-store/ensure-table.js';
import { type DynaliteHandle, startDynalite } from '../support/dynalite.js';
import { MemoryRateBudgetStore } from '../support/memory-rate-budget-store.js';
import { ACCOUNT, CREDENTIALS, REGION } from './support/harness.js';

const T0 = Date.UTC(2026, 0, 1);
/** Tickets as a marker carries them; a bare start time is one nothing was queued behind (the grace only). */
function heldTickets(tickets: Record<string, readonly (number | HeldTicket)[]>): Record<string, HeldTicket[]> {
  const held = (t: number | HeldTicket): HeldTicket => (typeof t === 'number' ? [t, t] : t);
  return Object.fromEntries(Object.entries(tickets).map(([key, list]) => [key, list.map(held)]));
}

/** 10 tokens, one every 200 ms. */
const RATE: BucketRate = { bucket: 10, refillPerSecond: 5 };

let dynalite: DynaliteHandle;
let api: SdkDynamoApi;
let table = 0;

beforeAll(async () => {
  dynalite = await startDynalite();
  api = new SdkDynamoApi(new DynamoDBClient({ region: REGION, endpoint: dynalite.endpoint, credentials: CREDENTIALS }));
});
afterAll(async () => {
  api.client.destroy();
  await dynalite.close();
});

/** A fresh table per store, so every test starts from full buckets. */
async function dynamoStore(): Promise<DynamoRateBudgetStore> {
  table += 1;
  const name = `budget-${table}`;
  await ensureTable(api.client, name);
  return new DynamoRateBudgetStore(api, name, REGION);
}

const stores: [string, () => Promise<RateBudgetStore>][] = [
  ['memory', async () => new MemoryRateBudgetStore()],
  ['dynamodb (dynalite)', dynamoStore],
];

describe.each(stores)('RateBudgetStore contract: %s', (_name, make) => {
  it('hands out a full bucket at once, then one token per refill interval', async () => {
    const store = await make();
    const first = await store.take('Attach', 10, RATE, T0, T0);
    expect(first).toEqual({ kind: 'granted', baseMs: T0 });
    // The eleventh token starts one interval later: allowed with a bound of 200 ms, refused with 199.
    expect(await store.take('Attach', 1, RATE, T0, T0 + 199)).toMatchObject({ kind: 'short' });
    expect(await store.take('Attach', 1, RATE, T0, T0 + 200)).toEqual({ kind: 'granted', baseMs: T0 + 2000 });
  });

  it('takes nothing when it refuses', async () => {
    const store = await make();
    await store.take('Create', 10, RATE, T0, T0);
    const refused = await store.take('Create', 5, RATE, T0, T0 + 500);
    expect(refused).toEqual({ kind: 'short', tatMs: T0 + 2000 });
    // Still the same stored time: the refused take left no debt behind.
    expect(await store.take('Create', 1, RATE, T0, T0 + 200)).toEqual({ kind: 'granted', baseMs: T0 + 2000 });
  });

  it('refills with time but never above the bucket', async () => {
    const store = await make();
    await store.take('Modify', 10, RATE, T0, T0);
    // One second later, 5 tokens are back.
    expect(await store.take('Modify', 5, RATE, T0 + 1000, T0 + 1000)).toMatchObject({ kind: 'granted' });
    expect(await store.take('Modify', 1, RATE, T0 + 1000, T0 + 1000)).toMatchObject({ kind: 'short' });
    // An hour idle refills to 10, not 18,000.
    const later = T0 + 3_600_000;
    expect(await store.take('Modify', 10, RATE, later, later)).toEqual({ kind: 'granted', baseMs: later });
    expect(await store.take('Modify', 1, RATE, later, later)).toMatchObject({ kind: 'short' });
  });

  it('keeps buckets apart', async () => {
    const store = await make();
    await store.take('A', 10, RATE, T0, T0);
    expect(await store.take('B', 10, RATE, T0, T0)).toEqual({ kind: 'granted', baseMs: T0 });
  });
});

/** Every start time of `starts` (sorted) fits the bucket: any window of W ms holds at most bucket + W·rate. */
function maxExcessOverBucket(starts: readonly number[], rate: BucketRate): number {
  const sorted = [...starts].sort((a, b) => a - b);
  let worst = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < sorted.length; i += 1)
    for (let j = i; j < sorted.length; j += 1) {
      const allowed = rate.bucket + Math.floor(((sorted[j]! - sorted[i]!) / 1000) * rate.refillPerSecond);
      worst = Math.max(worst, j - i + 1 - allowed);
    }
  return worst;
}

describe('Class: RateBudget', () => {
  /** A budget in simulated time: sleeping moves nobody's clock, the start times are recorded instead. */
  function simulated(store: RateBudgetStore, clock: ManualClock, maxWaitMs = 60_000) {
    const starts: number[] = [];
    const budget = new RateBudget({
      store,
      clock,
      rateOf: () => RATE,
      maxWaitMs,
      sleep: async () => {},
    });
    const take = async (arrivalMs = clock.nowMs()): Promise<number | 'deferred'> => {
      try {
        const start = await withEc2CallContext({ arrivalMs }, () => budget.acquire('Attach', 'AttachNetworkInterface'));
        starts.push(start);
        return start;
      } catch (err) {
        if (err instanceof RateBudgetDeferral) return 'deferred';
        throw err;
      }
    };
    return { budget, starts, take };
  }

  it.each(stores)(
    'never lets more through per window than the bucket allows, for many takers in two containers (%s)',
    async (_name, make) => {
      const store = await make();
      const clock = new ManualClock(T0);
      // Two "containers" (each its own queue) sharing one store, 60 takers in bursts over simulated time.
      const a = simulated(store, clock);
      const b = simulated(store, clock);
      const starts: number[] = [];
      for (let burst = 0; burst < 3; burst += 1) {
        const results = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).take()));
        for (const r of results) if (typeof r === 'number') starts.push(r);
        clock.advance(1500);
      }
      expect(starts).toHaveLength(60);
      expect(maxExcessOverBucket(starts, RATE)).toBeLessThanOrEqual(0);
      // Tight, not merely safe: the last of 60 starts when 10 + 5/s allow it, give or take the bursts' gaps.
      expect(Math.max(...starts) - T0).toBe(((60 - 10) / 5) * 1000);
      // Batched: far fewer store round trips than takers.
      expect(a.budget.stats.storeTakes + b.budget.stats.storeTakes).toBeLessThan(20);
    },
  );

  it('hands tokens to the earliest arrival first, and defers the latest when the wait would pass its bound', async () => {
    const clock = new ManualClock(T0);
    // A bound of 1 s: 10 tokens now plus 5 within the second; 20 takers arrive in reverse order.
    const { take } = simulated(new MemoryRateBudgetStore(), clock, 1000);
    const arrivals = Array.from({ length: 20 }, (_, i) => T0 - 1000 * (20 - i)).reverse();
    const results = await Promise.all(arrivals.map((arrivalMs) => take(arrivalMs)));
    const served = arrivals
      .map((arrivalMs, i) => ({ arrivalMs, result: results[i]! }))
      .sort((x, y) => x.arrivalMs - y.arrivalMs);
    // The 15 oldest got tokens, in arrival order; the 5 newest were deferred.
    const granted = served.filter((s) => s.result !== 'deferred');
    expect(granted.map((s) => s.arrivalMs)).toEqual(served.slice(0, 15).map((s) => s.arrivalMs));
    const startTimes = granted.map((s) => s.result as number);
    expect(startTimes).toEqual([...startTimes].sort((x, y) => x - y));
    expect(served.slice(15).every((s) => s.result === 'deferred')).toBe(true);
  });

  it('defers with the time of the next token, as a throttling error every EC2 path already retries', async () => {
    const clock = new ManualClock(T0);
    const { budget } = simulated(new MemoryRateBudgetStore(), clock, 0);
    for (let i = 0; i < 10; i += 1) await budget.acquire('Attach', 'AttachNetworkInterface');
    const err = await budget.acquire('Attach', 'AttachNetworkInterface').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RateBudgetDeferral);
    expect(err).toBeInstanceOf(Ec2ApiError);
    expect(err).toMatchObject({ kind: 'throttling', retryable: true, retryAfterMs: 200 });
  });

  it('fails open: an unreachable store lets the call through to EC2', async () => {
    const broken: RateBudgetStore = {
      take: async () => {
        throw Object.assign(new Error('connect ECONNREFUSED'), { name: 'TimeoutError' });
      },
    };
    const { budget } = simulated(broken, new ManualClock(T0));
    await expect(budget.acquire('Attach', 'AttachNetworkInterface')).resolves.toBe(T0);
    expect(budget.stats.failedOpen).toBe(1);
  });
});

describe('RateBudget tickets: declared calls reserved at once, carried across a re-enqueue', () => {
  /** One token per second, none in stock: each call has its own turn. */
  const SLOW: BucketRate = { bucket: 1, refillPerSecond: 1 };
  function budgetAt(clock: ManualClock, store: RateBudgetStore = new MemoryRateBudgetStore()) {
    const slept: number[] = [];
    // Sleeping moves no clock here: the start times say when each call would go.
    const budget = new RateBudget({
      store,
      clock,
      rateOf: () => SLOW,
      // Only the invocation's bound decides whether a held ticket is slept for or deferred here.
      ticketWaitMs: 0,
      ticketGraceTokens: 5,
      sleep: async (ms) => {
        slept.push(ms);
      },
    });
    return { budget, slept };
  }
  /** Runs `work` as one invocation of an event that arrived at `arrivalMs`, bound to `boundMs` of waiting. */
  const invocation = <T>(
    clock: ManualClock,
    arrivalMs: number,
    work: () => Promise<T>,
    tickets?: Record<string, readonly (number | HeldTicket)[]>,
    boundMs = 500,
  ) =>
    withEc2CallContext(
      { arrivalMs, deadlineMs: clock.nowMs() + boundMs, ...(tickets ? { tickets: heldTickets(tickets) } : {}) },
      work,
    );

  /**
   * Launch A (arrived first) needs two Create calls, makes one, is deferred at the second and is away until
   * its turn; launch B arrives meanwhile and may wait 1.5 s. Returns what each got.
   */
  async function twoLaunches(declare: boolean) {
    const clock = new ManualClock(T0);
    const store = new MemoryRateBudgetStore();
    const { budget } = budgetAt(clock, store);
    const create = (): Promise<number | RateBudgetDeferral> =>
      budget.acquire('Create', 'CreateNetworkInterface').catch((e: unknown) => {
        if (e instanceof RateBudgetDeferral) return e;
        throw e;
      });
    let carried: Record<string, HeldTicket[]> | undefined;
    const a = await invocation(clock, T0 - 10, async () => {
      if (declare) declareEc2Calls({ Create: 2 });
      const first = await create();
      const second = await create();
      carried = heldEc2Tickets();
      return [first, second];
    });
    const b = await invocation(clock, T0 - 5, create, undefined, 1500);
    // A comes back when its deferral said, with what it carried.
    clock.advance((a[1] as RateBudgetDeferral).retryAfterMs);
    const takesBefore = store.takes;
    const aAgain = await invocation(clock, T0 - 10, create, carried);
    return { a, b, aAgain, carried, takesOnReturn: store.takes - takesBefore, budget };
  }

  it('keeps an early arrival its turn while it is away; a later arrival queues behind it', async () => {
    const { a, b, aAgain, carried, takesOnReturn, budget } = await twoLaunches(true);
    expect(a[0]).toBe(T0);
    expect(a[1]).toMatchObject({ retryAfterMs: 1000 });
    // The token A did not use yet travels with its event.
    // Nothing was queued behind it when it was taken: usable for the grace only.
    expect(carried).toEqual({ Create: [[T0 + 1000, T0 + 1000]] });
    // B arrived later: its first token is after A's two, past its 1.5 s bound.
    expect(b).toMatchObject({ retryAfterMs: 2000 });
    // A's return uses its ticket at its turn, with no store round trip.
    expect(aAgain).toBe(T0 + 1000);
    expect(takesOnReturn).toBe(0);
    expect(budget.stats).toMatchObject({ reserved: 2, ticketsUsed: 2 });
  });

  it('negative control: without the declaration the later arrival takes the turn the away launch needed', async () => {
    const { a, b, aAgain, carried, takesOnReturn } = await twoLaunches(false);
    expect(a[1]).toBeInstanceOf(RateBudgetDeferral);
    expect(carried).toBeUndefined();
    expect(b).toBe(T0 + 1000);
    // A asks again on its return, finds its turn gone and is deferred a second time.
    expect(aAgain).toBeInstanceOf(RateBudgetDeferral);
    expect(takesOnReturn).toBeGreaterThan(0);
  });

  it('gives up a ticket used later than its grace (the call asks like any other); a punctual one is used', async () => {
    const clock = new ManualClock(T0);
    const { budget } = budgetAt(clock);
    // Someone else holds the bucket's next ten turns.
    await invocation(clock, T0, async () => {
      declareEc2Calls({ Create: 10 });
      await budget.acquire('Create', 'CreateNetworkInterface');
    });
    // A ticket 5 s old (the grace is 5 intervals of 1 s: still usable) and one 6 s old (not).
    clock.advance(6_000);
    const punctual = await invocation(clock, T0, () => budget.acquire('Create', 'CreateNetworkInterface'), {
      Create: [clock.nowMs() - 5_000],
    });
    expect(punctual).toBe(clock.nowMs() - 5_000);
    const late = await invocation(
      clock,
      T0,
      () => budget.acquire('Create', 'CreateNetworkInterface').catch((e: unknown) => e),
      { Create: [clock.nowMs() - 6_000] },
    );
    // Asked afresh, its turn is after the other holder's ten (T0 … T0+9 s): deferred past the 500 ms bound.
    expect(late).toBeInstanceOf(RateBudgetDeferral);
    expect(late).toMatchObject({ retryAfterMs: T0 + 10_000 - clock.nowMs() });
    expect(budget.stats).toMatchObject({ ticketsExpired: 1, ticketsUsed: 2 });
  });

  it("tolerates as much lateness in seconds at a raised bucket as at AWS's: the grace is the part held back", async () => {
    /** A ticket of Attach used `lateMs` after its time, at the account's figure `raised` (or AWS's). */
    const lateTicket = async (lateMs: number, raised?: Record<string, BucketRate>) => {
      const clock = new ManualClock(T0);
      const budget = new RateBudget({
        store: new MemoryRateBudgetStore(),
        clock,
        rateOf: ec2BucketRates({}, raised),
        sleep: async () => {},
      });
      clock.advance(lateMs);
      const ticket = T0;
      await invocation(clock, T0, () => budget.acquire('AttachNetworkInterface', 'AttachNetworkInterface'), {
        AttachNetworkInterface: [ticket],
      });
      return budget.stats.ticketsExpired;
    };
    const doubled = { AttachNetworkInterface: { bucket: 100, refillPerSecond: 10 } };
    // AWS's 50 at 5/s: 10 tokens held back, 2 s. Doubled, 100 at 10/s: 20 held back, still 2 s (not 10 × 0.1 s).
    expect(await lateTicket(1_900)).toBe(0);
    expect(await lateTicket(2_100)).toBe(1);
    expect(await lateTicket(1_900, doubled)).toBe(0);
    expect(await lateTicket(2_100, doubled)).toBe(1);
  });

  it('sleeps for a held ticket past the invocation bound when it is within ticketWaitMs', async () => {
    const clock = new ManualClock(T0);
    const slept: number[] = [];
    const budget = new RateBudget({
      store: new MemoryRateBudgetStore(),
      clock,
      rateOf: () => SLOW,
      ticketWaitMs: 3_000,
      sleep: async (ms) => {
        slept.push(ms);
      },
    });
    const take = (ticketMs: number) =>
      invocation(clock, T0, () => budget.acquire('Create', 'CreateNetworkInterface').catch((e: unknown) => e), {
        Create: [ticketMs],
      });
    expect(await take(T0 + 2_500)).toBe(T0 + 2_500);
    expect(await take(T0 + 3_500)).toBeInstanceOf(RateBudgetDeferral);
    expect(slept).toEqual([2_500]);
  });

  it('sleeps until a ticket it may use within its bound, and reserves declared keys only once', async () => {
    const clock = new ManualClock(T0);
    const { budget, slept } = budgetAt(clock);
    await invocation(clock, T0, async () => {
      declareEc2Calls({ Create: 1, Attach: 1 });
      await budget.acquire('Create', 'CreateNetworkInterface');
      // Declaring again what it already holds reserves nothing more.
      declareEc2Calls({ Attach: 1 });
      expect(heldEc2Tickets()).toEqual({ Attach: [[T0, T0]] });
      await budget.acquire('Attach', 'AttachNetworkInterface');
    });
    expect(budget.stats).toMatchObject({ reserved: 2, ticketsUsed: 2 });
    // A ticket 400 ms ahead, inside the 500 ms bound: slept, not deferred.
    const later = await invocation(clock, T0, () => budget.acquire('Create', 'CreateNetworkInterface'), {
      Create: [T0 + 400],
    });
    expect(later).toBe(T0 + 400);
    expect(slept).toEqual([400]);
  });
});

describe('Function: ec2BucketRates', () => {
  it("reads EC2's published figures, keeps a fifth of each burst back and follows a local cloud's time scale", () => {
    const rates = ec2BucketRates();
    expect(rates('AttachNetworkInterface')).toEqual({ bucket: 40, refillPerSecond: 5, heldBackTokens: 10 });
    expect(rates('CreateTags')).toEqual({ bucket: 80, refillPerSecond: 10, heldBackTokens: 20 });
    expect(rates('DescribeSubnets')).toEqual({ bucket: 80, refillPerSecond: 20, heldBackTokens: 20 });
    expect(rates('SomethingElse')).toEqual({ bucket: 40, refillPerSecond: 5, heldBackTokens: 10 });
    expect(ec2BucketRates({ rateScale: 20, rateShare: 0.5 })('CreateNetworkInterface')).toEqual({
      bucket: 80,
      refillPerSecond: 50,
      heldBackTokens: 20,
    });
  });
});

describe('BudgetedEc2 against the EC2 simulator (its token buckets answer RequestLimitExceeded)', () => {
  const SMALL = { bucket: 10, refillPerSecond: 20 };

  async function burst(withBudget: boolean): Promise<{ throttled: number; ok: number; errors: number }> {
    const sim = await startEc2Simulator({ region: REGION, accountId: ACCOUNT, timeScale: 1, throttling: true });
    const client = new EC2Client({
      region: REGION,
      endpoint: sim.endpoint,
      credentials: CREDENTIALS,
      maxAttempts: 1,
    });
    try {
      sim.admin.setBucket('CreateTags', SMALL);
      const vpc = sim.admin.seedVpc('10.0.0.0/16');
      const subnetId = sim.admin.seedSubnet(vpc.vpcId, '10.0.0.0/24', `${REGION}a`).subnetId;
      const sdk = new SdkEc2({ client, maxConcurrentMutations: 64 });
      // Half the burst held back, so scheduling jitter of up to 250 ms cannot push two tokens together.
      const budget = new RateBudget({
        store: new MemoryRateBudgetStore(),
        clock: { nowMs: () => Date.now() },
        rateOf: () => ({ bucket: SMALL.bucket / 2, refillPerSecond: SMALL.refillPerSecond }),
      });
      const ec2 = withBudget ? new BudgetedEc2(sdk, budget) : sdk;
      const eni = await sdk.createNetworkInterface({
        subnetId,
        securityGroupIds: [],
        ipCount: 0,
        prefixCount: 0,
        tags: {},
        clientToken: 'negative-control',
      });
      const results = await Promise.allSettled(
        Array.from({ length: 30 }, (_, i) => ec2.createTags([eni.eniId], { [`k${i}`]: 'v' })),
      );
      const counts = sim.admin.counts()['CreateTags'] ?? { throttled: 0, ok: 0 };
      return {
        throttled: counts.throttled,
        ok: counts.ok,
        errors: results.filter((r) => r.status === 'rejected').length,
      };
    } finally {
      client.destroy();
      await sim.close();
    }
  }

  it('sends 30 calls into a bucket of 10 without one RequestLimitExceeded; without it, EC2 refuses some', async () => {
    const without = await burst(false);
    expect(without.throttled).toBeGreaterThan(0);
    expect(without.errors).toBe(without.throttled);
    const within = await burst(true);
    expect(within).toEqual({ throttled: 0, ok: 30, errors: 0 });
  });
});
