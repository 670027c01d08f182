import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Ec2Call } from '../../local-cloud/ec2/simulator.js';
import { ManualClock } from '../../shared/clock.js';
import { BudgetedEc2 } from '../../shared/ec2/budgeted-ec2.js';
import { RateBudget } from '../../shared/ec2/rate-budget.js';
import type { RateBudgetStore } from '../../shared/ec2/rate-budget-store.js';
import { createLifecycleBatchHandler } from '../../shared/lifecycle/batch-handler.js';
import { createLifecycleRecordHandler } from '../../shared/lifecycle/record-handler.js';
import { MemoryRateBudgetStore } from '../support/memory-rate-budget-store.js';
import { launchEventBody, sqsRecord, terminateEventBody } from './support/events.js';
import { Harness } from './support/harness.js';

const record = sqsRecord;

describe('Lifecycle batch handler: one DescribeInstances per invocation', () => {
  let h: Harness;
  const calls: Ec2Call[] = [];
  beforeAll(async () => {
    h = await Harness.start({ config: { minLeases: 4 } });
    h.sim.api.onCall((call) => calls.push(call));
  });
  afterAll(() => h.close());

  const describes = (from: number): Ec2Call[] => calls.slice(from).filter((c) => c.action === 'DescribeInstances');
  const launch = (n: number): string[] => Array.from({ length: n }, () => h.launchInstance('m5.large'));

  it('describes the launches of a batch in one call where records one by one describe each', async () => {
    // Control: five launch records through the record handler alone, one invocation each.
    const alone = launch(5);
    const beforeAlone = calls.length;
    for (const id of alone) await createLifecycleRecordHandler(h.deps())(launchEventBody(id));
    const aloneDescribes = describes(beforeAlone);
    const aloneFirst = aloneDescribes.filter((c) => Array.isArray(c.input['InstanceIds']));

    // The same five launches as one SQS batch.
    const batched = launch(5);
    const beforeBatch = calls.length;
    const out = await createLifecycleBatchHandler(h.deps())({
      Records: batched.map((id, i) => record(`m${i}`, launchEventBody(id))),
    });
    expect(out.batchItemFailures).toEqual([]);
    const batchDescribes = describes(beforeBatch);
    // Exactly one call carries the batch's ids (a filter: an id EC2 does not know yet fails no one) ...
    const bulk = batchDescribes.filter((c) => !Array.isArray(c.input['InstanceIds']));
    expect(bulk).toHaveLength(1);
    expect(JSON.stringify(bulk[0]!.input)).toContain(batched[4]!);
    // ... and it replaces the five first describes: whatever the steps read later is read either way.
    expect(batchDescribes.length).toBe(aloneDescribes.length - aloneFirst.length + 1);
    expect(aloneFirst.length).toBeGreaterThanOrEqual(5);
    // The launches got just as far as alone: every one of the ten completed.
    for (const id of [...alone, ...batched]) expect(h.autoScaling.resultFor(id)).toEqual(['CONTINUE']);
  });
});

describe('A launch deferred by the EC2 rate budget', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await Harness.start({ config: { minLeases: 4 } });
  });
  afterAll(() => h.close());

  it('is re-enqueued for the time of its next token, with a heartbeat, not charged to its retry budget', async () => {
    const clock = new ManualClock(Date.now());
    const store = new MemoryRateBudgetStore();
    const rate = { bucket: 2, refillPerSecond: 0.1 };
    // The bucket is empty: the next CreateNetworkInterface token is 10 s away, past a bound of 1 s.
    await store.take('CreateNetworkInterface', 2, rate, clock.nowMs(), clock.nowMs());
    const budget = new RateBudget({ store, clock, rateOf: () => rate, maxWaitMs: 1000 });
    const id = h.launchInstance('m5.large');
    await createLifecycleRecordHandler(h.deps(undefined, { ec2: new BudgetedEc2(h.ec2, budget) }))(launchEventBody(id));
    const [requeued] = h.requeue.queued;
    // Back two seconds before its token, so the token's time falls inside the next invocation's short wait.
    expect(requeued?.delayS).toBe(8);
    expect(JSON.parse(requeued!.body).vpcLease).toMatchObject({ attempt: 1, waitedS: 0 });
    expect(h.autoScaling.heartbeats.map((r) => r.instanceId)).toEqual([id]);
    expect(h.autoScaling.resultFor(id)).toEqual([]);
    expect(budget.stats.deferred).toBeGreaterThan(0);
  });
});

describe('A launch holding EC2 tickets', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await Harness.start({ config: { minLeases: 4 } });
  });
  afterAll(() => h.close());

  it.each([
    {
      // One token per 10 s: a queued ticket may go up to 10 s late, so the launch comes back at its turn.
      attach: { bucket: 2, refillPerSecond: 0.1, heldBackTokens: 1 },
      takenBefore: 2,
      tickets: [
        [10_000, 20_000],
        [20_000, 30_000],
      ],
      delayS: 10,
    },
    {
      // One token per 2 s: 2 s of lateness is less than SQS's rounding and a busy pool, so it comes back early.
      attach: { bucket: 2, refillPerSecond: 0.5, heldBackTokens: 1 },
      takenBefore: 10,
      tickets: [
        [18_000, 20_000],
        [20_000, 22_000],
      ],
      delayS: 16,
    },
  ])(
    'reserves its remaining calls at once, carries the unused tickets across re-enqueues and spends them within their window (attach $attach.refillPerSecond/s)',
    async ({ attach, takenBefore, tickets, delayS }) => {
      const clock = new ManualClock(Date.now());
      const inner = new MemoryRateBudgetStore();
      const asked: string[] = [];
      // Every store round trip by bucket key: a call served by a ticket makes none.
      const store: RateBudgetStore = {
        take: (key, count, rate, nowMs, latestMs) => {
          asked.push(key);
          return inner.take(key, count, rate, nowMs, latestMs);
        },
      };
      // Attach: none in stock, others' turns queued ahead; every other bucket is roomy.
      await inner.take('AttachNetworkInterface', takenBefore, attach, clock.nowMs(), Number.MAX_SAFE_INTEGER);
      const t0 = clock.nowMs();
      const budget = new RateBudget({
        store,
        clock,
        rateOf: (key) => (key === 'AttachNetworkInterface' ? attach : { bucket: 100, refillPerSecond: 100 }),
        sleep: async (ms) => clock.advance(ms),
      });
      const deps = h.deps(undefined, { ec2: new BudgetedEc2(h.ec2, budget), clock });
      const handle = createLifecycleBatchHandler(deps, { budgetWaitMs: 500 });
      const id = h.launchInstance('m5.large');
      let body = launchEventBody(id);
      const markers: { tickets?: Record<string, [number, number][]>; delayS: number }[] = [];
      for (let round = 0; round < 8 && h.autoScaling.resultFor(id).length === 0; round += 1) {
        const before = h.requeue.queued.length;
        await handle({ Records: [sqsRecord(`r${round}`, body)] });
        const next = h.requeue.queued[before];
        if (!next) break;
        markers.push({ ...JSON.parse(next.body).vpcLease, delayS: next.delayS });
        body = next.body;
        // SQS and a busy pool bring it back a second after its delay.
        clock.advance(next.delayS * 1000 + 1000);
      }
      expect(h.autoScaling.resultFor(id)).toEqual(['CONTINUE']);
      // The first deferral carried both attach turns, each usable until the next one's turn.
      expect(markers[0]).toMatchObject({ delayS });
      expect(markers[0]!.tickets?.['AttachNetworkInterface']).toEqual(
        tickets.map(([start, until]) => [t0 + start!, t0 + until!]),
      );
      // Creates and attaches: reserved once (two ENIs), each spent from a ticket, none given up as late.
      expect(budget.stats).toMatchObject({ reserved: 4, ticketsUsed: 4, ticketsExpired: 0 });
      expect(asked.filter((k) => k === 'AttachNetworkInterface')).toHaveLength(1);
      expect(asked.filter((k) => k === 'CreateNetworkInterface')).toHaveLength(1);
    },
  );
});

describe('A launch with an inline attach wait (deps.attachWaitMs)', () => {
  let h: Harness;
  beforeAll(async () => {
    // Attachments take 300 ms of real time here.
    h = await Harness.start({ config: { minLeases: 4 }, ec2: { timeScale: 1, delays: { attachMs: 300 } } });
  });
  afterAll(() => h.close());

  it('finishes in one invocation instead of re-enqueuing behind newer events', async () => {
    const requeuing = h.launchInstance('m5.large');
    // Held, so a slow machine cannot let the 300 ms attachments finish before the handler's look.
    h.sim.admin.pauseAttachments();
    await createLifecycleRecordHandler(h.deps())(launchEventBody(requeuing));
    h.sim.admin.resumeAttachments();
    expect(h.requeue.queued.map((q) => JSON.parse(q.body).vpcLease.reason)).toEqual(['attachments in progress']);
    expect(h.autoScaling.resultFor(requeuing)).toEqual([]);

    const waiting = h.launchInstance('m5.large');
    const looks: Ec2Call[] = [];
    h.sim.api.onCall((call) => {
      // The look names its ENIs through the `network-interface-id` filter.
      if (call.action === 'DescribeNetworkInterfaces' && JSON.stringify(call.input).includes('network-interface-id'))
        looks.push(call);
    });
    await createLifecycleRecordHandler(h.deps(undefined, { attachWaitMs: 600 }))(launchEventBody(waiting));
    expect(h.autoScaling.resultFor(waiting)).toEqual(['CONTINUE']);
    expect(h.requeue.queued).toHaveLength(1);
    // One look for both ENIs, after the wait: a look right after attaching would only see them attaching.
    expect(looks).toHaveLength(1);
  });
});

describe('A terminate deferred by the EC2 rate budget', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await Harness.start({ config: { minLeases: 4 } });
  });
  afterAll(() => h.close());

  it('is re-enqueued for its next token with a heartbeat, and the hook is not completed', async () => {
    const id = h.launchInstance('m5.large');
    await createLifecycleRecordHandler(h.deps())(launchEventBody(id));
    expect(h.autoScaling.resultFor(id)).toEqual(['CONTINUE']);
    const clock = new ManualClock(Date.now());
    const inner = new MemoryRateBudgetStore();
    const rate = { bucket: 1, refillPerSecond: 0.1 };
    // Every bucket the sweep uses is empty on first sight: its next token is 10 s away, past the 1 s bound.
    const drained = new Set<string>();
    const store: RateBudgetStore = {
      take: async (key, count, r, nowMs, latestMs) => {
        if (!drained.has(key)) await inner.take(key, r.bucket, r, nowMs, nowMs);
        drained.add(key);
        return inner.take(key, count, r, nowMs, latestMs);
      },
    };
    const budget = new RateBudget({ store, clock, rateOf: () => rate, maxWaitMs: 1000 });
    const queuedBefore = h.requeue.queued.length;
    await createLifecycleRecordHandler(h.deps(undefined, { ec2: new BudgetedEc2(h.ec2, budget) }))(
      terminateEventBody(id),
    );
    const requeued = h.requeue.queued.slice(queuedBefore);
    expect(requeued).toHaveLength(1);
    expect(requeued[0]!.delayS).toBe(8);
    expect(JSON.parse(requeued[0]!.body).vpcLease).toMatchObject({ attempt: 1, waitedS: 0 });
    expect(h.autoScaling.heartbeats.map((r) => r.instanceId)).toContain(id);
    expect(h.autoScaling.resultFor(id)).toEqual(['CONTINUE']);
    expect(budget.stats.deferred).toBeGreaterThan(0);
  });
});
