import type { SQSEvent, SQSRecord } from 'aws-lambda';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { SimScheduler } from '../../local-cloud/events/scheduler.js';
import { createScheduler } from '../../local-cloud/events/scheduler.js';
import { SqsEngine } from '../../local-cloud/sqs/engine.js';
import type { EventSourceMappingOptions } from '../../local-cloud/sqs/event-source-mapping.js';
import { EventSourceMapping } from '../../local-cloud/sqs/event-source-mapping.js';
import { md5Hex } from '../../local-cloud/sqs/md5.js';
import type { Queue } from '../../local-cloud/sqs/queue.js';
import { ACCOUNT, eventually, REGION, sleepMs } from './helpers.js';

// 1 simulated second = 10 real ms: a 1 s visibility timeout returns a failed record after 10 ms.
const TIME_SCALE = 0.01;

describe('EventSourceMapping (Lambda SQS poller)', () => {
  let scheduler: SimScheduler;
  let engine: SqsEngine;
  const mappings: EventSourceMapping[] = [];
  let n = 0;

  beforeEach(() => {
    scheduler = createScheduler({ timeScale: TIME_SCALE });
    engine = new SqsEngine({ scheduler, region: REGION, accountId: ACCOUNT, seed: 11 });
  });
  afterEach(async () => {
    await Promise.all(mappings.splice(0).map((m) => m.stop()));
    engine.close();
    scheduler.close();
  });

  const queuePair = (maxReceiveCount = 3, visibilityTimeoutS = 1): { queue: Queue; dlq: Queue } => {
    n += 1;
    const dlq = engine.createQueue(`dlq-${n}`);
    const queue = engine.createQueue(`work-${n}`, {
      VisibilityTimeout: String(visibilityTimeoutS),
      RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlq.arn, maxReceiveCount }),
    });
    return { queue, dlq };
  };
  const map = (options: Omit<EventSourceMappingOptions, 'scheduler' | 'region' | 'accountId'>): EventSourceMapping => {
    const mapping = new EventSourceMapping({ scheduler, region: REGION, accountId: ACCOUNT, ...options });
    mappings.push(mapping);
    return mapping;
  };
  const sendAll = (queue: Queue, count: number): string[] =>
    Array.from({ length: count }, (_, i) => queue.send({ body: JSON.stringify({ i }) }).messageId);
  const drainIds = async (queue: Queue): Promise<string[]> => {
    const ids: string[] = [];
    for (;;) {
      const got = await queue.receive({ maxMessages: 10, visibilityTimeoutS: 60 });
      if (got.length === 0) return ids;
      ids.push(...got.map((m) => m.messageId));
    }
  };

  it('invokes the handler with the real SQSEvent record shape, in batches of at most batchSize', async () => {
    const { queue } = queuePair();
    const sent = sendAll(queue, 25);
    queue.send({
      body: 'with attributes',
      messageAttributes: { kind: { DataType: 'String', StringValue: 'launch' } },
    });
    const batches: SQSRecord[][] = [];
    let functionName = '';
    const mapping = map({
      queue,
      batchSize: 10,
      functionName: 'instance-lifecycle',
      handler: (event: SQSEvent, context) => {
        batches.push(event.Records);
        functionName = context.functionName;
        expect(context.getRemainingTimeInMillis()).toBeGreaterThan(0);
      },
    });
    await eventually(() => mapping.stats().recordsDeleted === 26, { what: '26 records processed' });
    expect(functionName).toBe('instance-lifecycle');
    expect(batches.every((b) => b.length >= 1 && b.length <= 10)).toBe(true);
    const records = batches.flat();
    expect(new Set(records.map((r) => r.messageId)).size).toBe(26);
    expect(records.map((r) => r.messageId)).toEqual(expect.arrayContaining(sent));
    const record = records.find((r) => r.body === 'with attributes')!;
    expect(record).toEqual({
      messageId: expect.stringMatching(/^[0-9a-f-]{36}$/),
      receiptHandle: expect.any(String),
      body: 'with attributes',
      attributes: {
        ApproximateReceiveCount: '1',
        SentTimestamp: expect.stringMatching(/^\d{13}$/),
        SenderId: expect.any(String),
        ApproximateFirstReceiveTimestamp: expect.stringMatching(/^\d{13}$/),
      },
      messageAttributes: {
        kind: { stringValue: 'launch', stringListValues: [], binaryListValues: [], dataType: 'String' },
      },
      md5OfBody: md5Hex('with attributes'),
      md5OfMessageAttributes: expect.stringMatching(/^[0-9a-f]{32}$/),
      eventSource: 'aws:sqs',
      eventSourceARN: queue.arn,
      awsRegion: REGION,
    });
    expect(queue.counts()).toEqual({ visible: 0, inFlight: 0, delayed: 0 });
  });

  it('deletes only the records not in batchItemFailures; failures return and reach the DLQ after maxReceiveCount', async () => {
    const { queue, dlq } = queuePair(3, 1);
    const sent = sendAll(queue, 12);
    const poison = new Set(sent.filter((_, i) => i % 4 === 0));
    const succeeded = new Set<string>();
    const attemptsOfPoison = new Map<string, string[]>();
    const mapping = map({
      queue,
      batchSize: 5,
      handler: (event) => {
        const failures = [];
        for (const record of event.Records) {
          if (poison.has(record.messageId)) {
            attemptsOfPoison.set(record.messageId, [
              ...(attemptsOfPoison.get(record.messageId) ?? []),
              record.attributes.ApproximateReceiveCount,
            ]);
            failures.push({ itemIdentifier: record.messageId });
          } else succeeded.add(record.messageId);
        }
        return { batchItemFailures: failures };
      },
    });
    // Each poison message is received 3 times and moved on its 4th receive, which only a poll triggers.
    await eventually(() => dlq.counts().visible === poison.size, {
      what: 'poison messages in the DLQ',
      timeoutMs: 15_000,
    });
    await mapping.stop();
    expect(succeeded).toEqual(new Set(sent.filter((id) => !poison.has(id))));
    for (const id of poison) expect(attemptsOfPoison.get(id)).toEqual(['1', '2', '3']);
    // No message lost, none duplicated across the two queues.
    expect(new Set(await drainIds(dlq))).toEqual(poison);
    expect(await drainIds(queue)).toEqual([]);
    expect(mapping.stats().recordsDeleted).toBe(sent.length - poison.size);
  });

  it('invokes nothing while disabled, and delivers what waited once enabled again', async () => {
    const { queue } = queuePair(3, 60);
    const seen: string[] = [];
    const mapping = map({
      queue,
      batchSize: 10,
      handler: (event: SQSEvent) => {
        seen.push(...event.Records.map((r) => r.messageId));
      },
    });
    const first = queue.send({ body: 'before' }).messageId;
    await eventually(() => seen.includes(first), { what: 'delivery while enabled' });
    mapping.setEnabled(false);
    const held = sendAll(queue, 3);
    // 500 real ms = 50 simulated s: long polls end and new ones start, none may invoke the handler.
    await sleepMs(500);
    expect(seen).toEqual([first]);
    mapping.setEnabled(true);
    await eventually(() => held.every((id) => seen.includes(id)), { what: 'delivery after enable' });
    expect(seen.sort()).toEqual([first, ...held].sort());
  });

  it('returns the whole batch when the handler throws', async () => {
    const { queue } = queuePair(5, 1);
    const sent = sendAll(queue, 4);
    const seen: { id: string; count: string }[] = [];
    let calls = 0;
    const mapping = map({
      queue,
      batchSize: 10,
      handler: (event) => {
        calls += 1;
        for (const r of event.Records) seen.push({ id: r.messageId, count: r.attributes.ApproximateReceiveCount });
        if (calls === 1) throw new Error('boom');
      },
    });
    await eventually(() => mapping.stats().recordsDeleted === 4, { what: 'retry succeeded' });
    expect(mapping.stats().failedInvocations).toBe(1);
    for (const id of sent) {
      expect(seen.filter((s) => s.id === id).map((s) => s.count)).toEqual(['1', '2']);
    }
  });

  it('fails the whole batch when batchItemFailures names an unknown or empty itemIdentifier', async () => {
    const { queue } = queuePair(5, 1);
    sendAll(queue, 3);
    let calls = 0;
    const mapping = map({
      queue,
      batchSize: 10,
      handler: () => {
        calls += 1;
        return calls === 1 ? { batchItemFailures: [{ itemIdentifier: '' }] } : { batchItemFailures: [] };
      },
    });
    await eventually(() => mapping.stats().recordsDeleted === 3);
    expect(mapping.stats()).toMatchObject({ failedInvocations: 1, recordsFailed: 3 });
  });

  it('never runs more invocations at once than maximumConcurrency, and uses that many under load', async () => {
    const { queue } = queuePair(5, 60);
    sendAll(queue, 30);
    let running = 0;
    let peak = 0;
    const mapping = map({
      queue,
      batchSize: 1,
      maximumConcurrency: 3,
      handler: async () => {
        running += 1;
        peak = Math.max(peak, running);
        await sleepMs(5);
        running -= 1;
      },
    });
    await eventually(() => mapping.stats().recordsDeleted === 30, { what: '30 processed' });
    expect(peak).toBe(3);
  });

  it('fails a batch whose handler outlives the function timeout', async () => {
    // Visibility well above the function timeout (AWS advises 6x), so the retry follows the timeout.
    const { queue } = queuePair(5, 18);
    const [id] = sendAll(queue, 1);
    let calls = 0;
    const mapping = map({
      queue,
      functionTimeoutS: 3,
      handler: async () => {
        calls += 1;
        if (calls === 1) await new Promise(() => {}); // hangs, as a stuck Lambda would
      },
    });
    await eventually(() => mapping.stats().recordsDeleted === 1, { what: 'retry after timeout' });
    expect(mapping.stats()).toMatchObject({ failedInvocations: 1, recordsFailed: 1, invocations: 2 });
    expect(calls).toBe(2);
    expect(id).toBeTruthy();
  });

  it('keeps a record an overlong invocation finishes after it was received again: its delete is stale', async () => {
    const { queue } = queuePair(5, 1);
    const [id] = sendAll(queue, 1);
    let secondSeen: () => void = () => {};
    const second = new Promise<void>((resolve) => {
      secondSeen = resolve;
    });
    let calls = 0;
    const mapping = map({
      queue,
      handler: async () => {
        calls += 1;
        // The first invocation outlives the 1 s visibility timeout: it finishes only after the redelivery.
        if (calls === 1) await second;
        else secondSeen();
      },
    });
    await eventually(() => mapping.stats().staleDeletes === 1 && mapping.stats().recordsDeleted === 1, {
      what: 'one real and one stale delete',
    });
    expect(calls).toBe(2);
    expect(queue.counts()).toEqual({ visible: 0, inFlight: 0, delayed: 0 });
    expect(id).toBeTruthy();
  });

  it('with holdWhileRunning, receives no record again mid-invocation; a failed one still returns after it', async () => {
    const { queue } = queuePair(5, 1);
    sendAll(queue, 1);
    let calls = 0;
    let running = 0;
    let maxRunning = 0;
    const mapping = map({
      queue,
      holdWhileRunning: true,
      handler: async () => {
        calls += 1;
        running += 1;
        maxRunning = Math.max(maxRunning, running);
        try {
          // Five visibility timeouts (simulated) inside one invocation, which then fails.
          if (calls === 1) {
            await scheduler.sleep(5000);
            throw new Error('failed after outliving the visibility timeout');
          }
        } finally {
          running -= 1;
        }
      },
    });
    await eventually(() => mapping.stats().recordsDeleted === 1, { what: 'the retry deletes the record' });
    expect(maxRunning).toBe(1);
    expect(calls).toBe(2);
    expect(mapping.stats()).toMatchObject({ failedInvocations: 1, staleDeletes: 0 });
    expect(queue.counts()).toEqual({ visible: 0, inFlight: 0, delayed: 0 });
  });

  it('delivers an injected duplicate again: at-least-once, so consumers must be idempotent', async () => {
    const { queue } = queuePair(5, 30);
    const [id] = sendAll(queue, 1);
    expect(queue.injectDuplicate(id!)).toBe(true);
    const deliveries: string[] = [];
    const mapping = map({ queue, batchSize: 1, handler: (event) => void deliveries.push(event.Records[0]!.messageId) });
    await eventually(() => mapping.stats().recordsDeleted === 2, { what: 'both copies' });
    expect(deliveries).toEqual([id, id]);
  });

  it('with a duplicate rate, processes every message at least once and some more than once', async () => {
    scheduler.close();
    scheduler = createScheduler({ timeScale: TIME_SCALE });
    engine.close();
    engine = new SqsEngine({ scheduler, region: REGION, accountId: ACCOUNT, seed: 5, duplicateRate: 0.3 });
    const queue = engine.createQueue('dupes', { VisibilityTimeout: '30' });
    const sent = sendAll(queue, 20);
    const deliveries: string[] = [];
    const mapping = map({
      queue,
      batchSize: 10,
      handler: (event) => void deliveries.push(...event.Records.map((r) => r.messageId)),
    });
    await eventually(
      () => queue.counts().visible + queue.counts().inFlight === 0 && mapping.stats().inFlightInvocations === 0,
      {
        what: 'queue drained',
      },
    );
    expect(new Set(deliveries)).toEqual(new Set(sent));
    expect(deliveries.length).toBeGreaterThan(sent.length);
  });

  it('gathers records within the batching window instead of invoking per message', async () => {
    // Visibility well above the window, as AWS requires, so no record is received twice meanwhile.
    const { queue } = queuePair(5, 600);
    const sizes: number[] = [];
    const mapping = map({
      queue,
      batchSize: 10,
      maximumBatchingWindowS: 60,
      handler: (e) => void sizes.push(e.Records.length),
    });
    // Six messages trickle in well within one 60 s (600 ms real) window.
    for (let i = 0; i < 6; i += 1) {
      queue.send({ body: String(i) });
      await sleepMs(5);
    }
    await eventually(() => mapping.stats().recordsDeleted === 6);
    expect(mapping.stats().staleDeletes).toBe(0);
    expect(sizes.length).toBeLessThan(6);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(6);
  });

  it('builds batches above 10 records from several receives within the window', async () => {
    const { queue } = queuePair(5, 600);
    const sent = sendAll(queue, 25);
    const sizes: number[] = [];
    const ids: string[] = [];
    const mapping = map({
      queue,
      batchSize: 25,
      maximumBatchingWindowS: 1,
      handler: (e) => {
        sizes.push(e.Records.length);
        ids.push(...e.Records.map((r) => r.messageId));
      },
    });
    await eventually(() => mapping.stats().recordsDeleted === 25);
    expect(ids.sort()).toEqual([...sent].sort());
    expect(Math.max(...sizes)).toBeGreaterThan(10);
    expect(() => map({ queue, batchSize: 11, handler: () => {} })).toThrow(/maximumBatchingWindowS/);
  });

  it('waits for running invocations on stop and applies their result', async () => {
    const { queue } = queuePair(5, 60);
    sendAll(queue, 1);
    let release: () => void = () => {};
    const started = new Promise<void>((resolve) => {
      release = resolve;
    });
    let finish: () => void = () => {};
    const mapping = map({
      queue,
      handler: async () => {
        release();
        await new Promise<void>((r) => {
          finish = r;
        });
      },
    });
    await started;
    const stopping = mapping.stop();
    let stopped = false;
    void stopping.then(() => {
      stopped = true;
    });
    await sleepMs(20);
    expect(stopped).toBe(false);
    finish();
    await stopping;
    expect(mapping.stats().recordsDeleted).toBe(1);
  });
});
