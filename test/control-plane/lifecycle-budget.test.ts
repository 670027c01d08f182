import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Ec2Call } from '../../infra/local/ec2/simulator.js';
import { ManualClock } from '../../shared/clock.js';
import { BudgetedEc2 } from '../../shared/ec2/budgeted-ec2.js';
import { MemoryRateBudgetStore, RateBudget } from '../../shared/ec2/rate-budget.js';
import { createLifecycleBatchHandler } from '../../shared/lifecycle/batch-handler.js';
import { createLifecycleRecordHandler } from '../../shared/lifecycle/record-handler.js';
import { launchEventBody, sqsRecord } from './support/events.js';
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
    expect(requeued?.delayS).toBe(10);
    expect(JSON.parse(requeued!.body).vpcLease).toMatchObject({ attempt: 1, waitedS: 0 });
    expect(h.autoScaling.heartbeats.map((r) => r.instanceId)).toEqual([id]);
    expect(h.autoScaling.resultFor(id)).toEqual([]);
    expect(budget.stats.deferred).toBeGreaterThan(0);
  });
});
