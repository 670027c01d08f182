import { createHash } from 'node:crypto';
import {
  ChangeMessageVisibilityBatchCommand,
  ChangeMessageVisibilityCommand,
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  DeleteMessageCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  GetQueueUrlCommand,
  ListMessageMoveTasksCommand,
  ListQueuesCommand,
  PurgeQueueCommand,
  QueueDoesNotExist,
  ReceiptHandleIsInvalid,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
  SetQueueAttributesCommand,
  SQSClient,
  StartMessageMoveTaskCommand,
  TooManyEntriesInBatchRequest,
} from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SimScheduler } from '../../local-cloud/events/scheduler.js';
import { createScheduler } from '../../local-cloud/events/scheduler.js';
import type { SqsSimulatorHandle } from '../../local-cloud/sqs/index.js';
import { startSqsSimulator } from '../../local-cloud/sqs/index.js';
import { md5OfMessageAttributes } from '../../local-cloud/sqs/md5.js';
import { ACCOUNT, eventually, LOCAL_CREDENTIALS, REGION } from './helpers.js';

// 1 simulated second = 20 real ms: visibility timeouts and delays run 50x faster than AWS's.
const TIME_SCALE = 0.02;

describe('SQS simulator over the JSON protocol', () => {
  let scheduler: SimScheduler;
  let sqs: SqsSimulatorHandle;
  let client: SQSClient;
  let n = 0;
  const freshQueue = async (attributes: Record<string, string> = {}): Promise<string> => {
    n += 1;
    const out = await client.send(new CreateQueueCommand({ QueueName: `q-${n}`, Attributes: attributes }));
    return out.QueueUrl!;
  };
  const arnOf = async (url: string): Promise<string> =>
    (await client.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['QueueArn'] }))).Attributes![
      'QueueArn'
    ]!;

  beforeAll(async () => {
    scheduler = createScheduler({ timeScale: TIME_SCALE });
    sqs = await startSqsSimulator({ scheduler, region: REGION, accountId: ACCOUNT });
    client = new SQSClient({ endpoint: sqs.endpoint, region: REGION, credentials: LOCAL_CREDENTIALS });
  });
  afterAll(async () => {
    client.destroy();
    await sqs.close();
    scheduler.close();
  });

  it('creates a queue idempotently and resolves it by name, URL and listing', async () => {
    const url = await freshQueue({ VisibilityTimeout: '5' });
    const again = await client.send(
      new CreateQueueCommand({ QueueName: `q-${n}`, Attributes: { VisibilityTimeout: '5' } }),
    );
    expect(again.QueueUrl).toBe(url);
    await expect(
      client.send(new CreateQueueCommand({ QueueName: `q-${n}`, Attributes: { VisibilityTimeout: '6' } })),
    ).rejects.toMatchObject({ name: 'QueueNameExists', Code: 'QueueAlreadyExists' });
    const byName = await client.send(new GetQueueUrlCommand({ QueueName: `q-${n}` }));
    expect(byName.QueueUrl).toBe(url);
    expect(url).toBe(`${sqs.endpoint}/${ACCOUNT}/q-${n}`);
    const listed = await client.send(new ListQueuesCommand({ QueueNamePrefix: `q-${n}` }));
    expect(listed.QueueUrls).toEqual([url]);
    expect(await arnOf(url)).toBe(`arn:aws:sqs:${REGION}:${ACCOUNT}:q-${n}`);
  });

  it('returns QueueDoesNotExist with the legacy query code for an unknown queue', async () => {
    const err = await client.send(new GetQueueUrlCommand({ QueueName: 'nope' })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(QueueDoesNotExist);
    expect(err).toMatchObject({ Code: 'AWS.SimpleQueueService.NonExistentQueue', $metadata: { httpStatusCode: 400 } });
  });

  it('round-trips bodies and attributes with the MD5s the SDK verifies', async () => {
    const url = await freshQueue();
    const body = 'héllo → wörld ✓';
    const attrs = {
      kind: { DataType: 'String', StringValue: 'launch' },
      n: { DataType: 'Number', StringValue: '42' },
      blob: { DataType: 'Binary', BinaryValue: new Uint8Array([0, 1, 2, 250]) },
    };
    const sent = await client.send(
      new SendMessageCommand({ QueueUrl: url, MessageBody: body, MessageAttributes: attrs }),
    );
    expect(sent.MessageId).toMatch(/^[0-9a-f-]{36}$/);
    expect(sent.MD5OfMessageAttributes).toBe(
      md5OfMessageAttributes({
        kind: attrs.kind,
        n: attrs.n,
        blob: { DataType: 'Binary', BinaryValue: attrs.blob.BinaryValue },
      }),
    );
    const got = await client.send(
      new ReceiveMessageCommand({
        QueueUrl: url,
        MessageAttributeNames: ['All'],
        MessageSystemAttributeNames: ['All'],
      }),
    );
    const [message] = got.Messages ?? [];
    expect(message?.Body).toBe(body);
    expect(message?.MessageId).toBe(sent.MessageId);
    expect(message?.MD5OfMessageAttributes).toBe(sent.MD5OfMessageAttributes);
    expect(message?.MessageAttributes?.['blob']?.BinaryValue).toEqual(new Uint8Array([0, 1, 2, 250]));
    expect(message?.Attributes?.['ApproximateReceiveCount']).toBe('1');
    expect(Number(message?.Attributes?.['SentTimestamp'])).toBeGreaterThan(0);
  });

  it('encodes message attributes for their MD5 as SQS documents (length-prefixed, transport byte)', () => {
    const md5 = md5OfMessageAttributes({ a: { DataType: 'String', StringValue: 'b' } });
    const manual = Buffer.concat([
      Buffer.from([0, 0, 0, 1]),
      Buffer.from('a'),
      Buffer.from([0, 0, 0, 6]),
      Buffer.from('String'),
      Buffer.from([1]),
      Buffer.from([0, 0, 0, 1]),
      Buffer.from('b'),
    ]);
    expect(md5).toBe(createHash('md5').update(manual).digest('hex'));
  });

  it('hides a received message for its visibility timeout and redelivers it with a higher receive count', async () => {
    // 60 s of visibility is 1.2 s here: ample margin for "still hidden" on a loaded machine.
    const url = await freshQueue({ VisibilityTimeout: '60' });
    const sent = await client.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'x' }));
    const receive = async (extra: Partial<ConstructorParameters<typeof ReceiveMessageCommand>[0]> = {}) =>
      (await client.send(new ReceiveMessageCommand({ QueueUrl: url, AttributeNames: ['All'], ...extra }))).Messages ??
      [];
    const [first] = await receive();
    expect(first?.MessageId).toBe(sent.MessageId);
    expect(await receive()).toEqual([]);
    const hiddenCounts = await client.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['All'] }));
    expect(hiddenCounts.Attributes).toMatchObject({
      ApproximateNumberOfMessages: '0',
      ApproximateNumberOfMessagesNotVisible: '1',
    });
    // ChangeMessageVisibility 0 makes it receivable at once.
    await client.send(
      new ChangeMessageVisibilityCommand({ QueueUrl: url, ReceiptHandle: first!.ReceiptHandle!, VisibilityTimeout: 0 }),
    );
    const [second] = await receive({ VisibilityTimeout: 1 });
    expect(second?.Attributes?.['ApproximateReceiveCount']).toBe('2');
    expect(second?.ReceiptHandle).not.toBe(first?.ReceiptHandle);
    // A 1 s visibility runs out by itself: a long poll picks the message up again.
    const third = await eventually(async () => (await receive({ WaitTimeSeconds: 20 }))[0], { what: 'redelivery' });
    expect(third.MessageId).toBe(sent.MessageId);
    expect(third.Attributes?.['ApproximateReceiveCount']).toBe('3');
    // A stale handle deletes nothing (SQS: "the request succeeds, but the message might not be deleted").
    await client.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: second!.ReceiptHandle! }));
    await expect(
      client.send(
        new ChangeMessageVisibilityCommand({
          QueueUrl: url,
          ReceiptHandle: second!.ReceiptHandle!,
          VisibilityTimeout: 0,
        }),
      ),
    ).rejects.toMatchObject({ name: 'MessageNotInflight', Code: 'AWS.SimpleQueueService.MessageNotInflight' });
    await client.send(
      new ChangeMessageVisibilityCommand({ QueueUrl: url, ReceiptHandle: third.ReceiptHandle!, VisibilityTimeout: 0 }),
    );
    const [fourth] = await receive();
    expect(fourth?.Attributes?.['ApproximateReceiveCount']).toBe('4');
    await client.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: fourth!.ReceiptHandle! }));
    // Deleting again with the same handle is still a success, as in SQS.
    await client.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: fourth!.ReceiptHandle! }));
    const attrs = await client.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['All'] }));
    expect(attrs.Attributes?.['ApproximateNumberOfMessages']).toBe('0');
    expect(attrs.Attributes?.['ApproximateNumberOfMessagesNotVisible']).toBe('0');
  });

  it('rejects a receipt handle it never issued', async () => {
    const url = await freshQueue();
    await expect(
      client.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: 'bogus' })),
    ).rejects.toBeInstanceOf(ReceiptHandleIsInvalid);
  });

  it('delays a message sent with DelaySeconds and counts it as delayed until then', async () => {
    const url = await freshQueue();
    // 30 s of delay is 0.6 s here.
    await client.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'later', DelaySeconds: 30 }));
    const attrs = await client.send(
      new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['ApproximateNumberOfMessagesDelayed'] }),
    );
    expect(attrs.Attributes?.['ApproximateNumberOfMessagesDelayed']).toBe('1');
    const now = await client.send(new ReceiveMessageCommand({ QueueUrl: url }));
    expect(now.Messages ?? []).toHaveLength(0);
    // A long poll returns as soon as the delay ends.
    const later = await eventually(
      async () => (await client.send(new ReceiveMessageCommand({ QueueUrl: url, WaitTimeSeconds: 20 }))).Messages?.[0],
      { what: 'the delayed message' },
    );
    expect(later.Body).toBe('later');
  });

  it('sends and deletes in batches of at most 10 and reports per-entry failures', async () => {
    const url = await freshQueue();
    const entries = Array.from({ length: 10 }, (_, i) => ({ Id: `m${i}`, MessageBody: `body-${i}` }));
    const sent = await client.send(new SendMessageBatchCommand({ QueueUrl: url, Entries: entries }));
    expect(sent.Successful).toHaveLength(10);
    await expect(
      client.send(
        new SendMessageBatchCommand({ QueueUrl: url, Entries: [...entries, { Id: 'm10', MessageBody: 'x' }] }),
      ),
    ).rejects.toBeInstanceOf(TooManyEntriesInBatchRequest);
    const bad = await client.send(
      new SendMessageBatchCommand({
        QueueUrl: url,
        Entries: [
          { Id: 'ok', MessageBody: 'y' },
          { Id: 'late', MessageBody: 'z', DelaySeconds: 901 },
        ],
      }),
    );
    expect(bad.Successful?.map((e) => e.Id)).toEqual(['ok']);
    expect(bad.Failed).toEqual([
      expect.objectContaining({ Id: 'late', SenderFault: true, Code: 'InvalidParameterValue' }),
    ]);
    const got = await client.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10 }));
    expect(got.Messages).toHaveLength(10);
    const deleted = await client.send(
      new DeleteMessageBatchCommand({
        QueueUrl: url,
        Entries: got.Messages!.map((m, i) => ({ Id: `d${i}`, ReceiptHandle: m.ReceiptHandle! })),
      }),
    );
    expect(deleted.Successful).toHaveLength(10);
    const left = await client.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['All'] }));
    expect(Number(left.Attributes?.['ApproximateNumberOfMessages'])).toBe(1);
  });

  it('purges a queue once per 60 seconds', async () => {
    const url = await freshQueue();
    await client.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'x' }));
    await client.send(new PurgeQueueCommand({ QueueUrl: url }));
    await expect(client.send(new PurgeQueueCommand({ QueueUrl: url }))).rejects.toMatchObject({
      name: 'PurgeQueueInProgress',
    });
    const got = await client.send(new ReceiveMessageCommand({ QueueUrl: url }));
    expect(got.Messages ?? []).toHaveLength(0);
  });

  it('moves a message to the DLQ after maxReceiveCount receives and redrives it back', async () => {
    const dlqUrl = await freshQueue();
    const dlqArn = await arnOf(dlqUrl);
    const url = await freshQueue({
      VisibilityTimeout: '0',
      RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: 2 }),
    });
    const sourceArn = await arnOf(url);
    const sent = await client.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'poison' }));
    for (let i = 0; i < 2; i += 1) {
      const got = await client.send(new ReceiveMessageCommand({ QueueUrl: url }));
      expect(got.Messages?.[0]?.MessageId).toBe(sent.MessageId);
    }
    // The third receive finds it over the limit and moves it instead of delivering it.
    const third = await client.send(new ReceiveMessageCommand({ QueueUrl: url }));
    expect(third.Messages ?? []).toHaveLength(0);
    const dead = await client.send(
      new ReceiveMessageCommand({ QueueUrl: dlqUrl, MessageSystemAttributeNames: ['All'], VisibilityTimeout: 0 }),
    );
    expect(dead.Messages?.[0]).toMatchObject({ MessageId: sent.MessageId, Body: 'poison' });
    expect(dead.Messages?.[0]?.Attributes?.['DeadLetterQueueSourceArn']).toBe(sourceArn);

    await expect(client.send(new StartMessageMoveTaskCommand({ SourceArn: sourceArn }))).rejects.toMatchObject({
      name: 'InvalidParameterValue',
    });
    const task = await client.send(new StartMessageMoveTaskCommand({ SourceArn: dlqArn }));
    expect(task.TaskHandle).toBeTruthy();
    const back = await eventually(
      async () => (await client.send(new ReceiveMessageCommand({ QueueUrl: url }))).Messages?.[0],
      { what: 'redriven message' },
    );
    expect(back.Body).toBe('poison');
    const tasks = await eventually(async () => {
      const listed = await client.send(new ListMessageMoveTasksCommand({ SourceArn: dlqArn }));
      return listed.Results?.[0]?.Status === 'COMPLETED' ? listed.Results : undefined;
    });
    expect(tasks[0]?.ApproximateNumberOfMessagesMoved).toBe(1);
  });

  it('never hands one message to two concurrent receivers while it is in flight', async () => {
    const url = await freshQueue({ VisibilityTimeout: '600' });
    const bodies = Array.from({ length: 50 }, (_, i) => `m-${i}`);
    for (let i = 0; i < bodies.length; i += 10) {
      await client.send(
        new SendMessageBatchCommand({
          QueueUrl: url,
          Entries: bodies.slice(i, i + 10).map((b, j) => ({ Id: `e${j}`, MessageBody: b })),
        }),
      );
    }
    const received: string[] = [];
    const worker = async (): Promise<void> => {
      for (;;) {
        const got = await client.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 3 }));
        if (!got.Messages?.length) return;
        for (const m of got.Messages) {
          received.push(m.Body!);
          await client.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: m.ReceiptHandle! }));
        }
      }
    };
    await Promise.all(Array.from({ length: 10 }, worker));
    expect(received.sort()).toEqual([...bodies].sort());
  });

  it('pages ListQueues, applies SetQueueAttributes, changes visibility in batches and deletes queues', async () => {
    const urls = [await freshQueue(), await freshQueue(), await freshQueue()];
    const prefix = 'q-';
    const first = await client.send(new ListQueuesCommand({ QueueNamePrefix: prefix, MaxResults: 2 }));
    expect(first.QueueUrls).toHaveLength(2);
    expect(first.NextToken).toBeTruthy();
    const rest = await client.send(
      new ListQueuesCommand({ QueueNamePrefix: prefix, MaxResults: 1000, NextToken: first.NextToken }),
    );
    expect([...first.QueueUrls!, ...(rest.QueueUrls ?? [])]).toEqual(expect.arrayContaining(urls));
    const url = urls[0]!;
    await client.send(new SetQueueAttributesCommand({ QueueUrl: url, Attributes: { VisibilityTimeout: '600' } }));
    const attrs = await client.send(
      new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['VisibilityTimeout'] }),
    );
    expect(attrs.Attributes).toEqual({ VisibilityTimeout: '600' });
    await expect(
      client.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 11 })),
    ).rejects.toMatchObject({ name: 'InvalidParameterValue' });
    await client.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'a' }));
    const [got] = (await client.send(new ReceiveMessageCommand({ QueueUrl: url }))).Messages ?? [];
    const changed = await client.send(
      new ChangeMessageVisibilityBatchCommand({
        QueueUrl: url,
        Entries: [
          { Id: 'ok', ReceiptHandle: got!.ReceiptHandle!, VisibilityTimeout: 0 },
          { Id: 'bad', ReceiptHandle: 'bogus', VisibilityTimeout: 0 },
        ],
      }),
    );
    expect(changed.Successful?.map((e) => e.Id)).toEqual(['ok']);
    expect(changed.Failed?.map((e) => [e.Id, e.Code])).toEqual([['bad', 'ReceiptHandleIsInvalid']]);
    expect((await client.send(new ReceiveMessageCommand({ QueueUrl: url }))).Messages?.[0]?.Body).toBe('a');
    await client.send(new DeleteQueueCommand({ QueueUrl: url }));
    await expect(client.send(new GetQueueUrlCommand({ QueueName: url.split('/').pop()! }))).rejects.toBeInstanceOf(
      QueueDoesNotExist,
    );
  });

  it('wakes a long poll when a message arrives', async () => {
    const url = await freshQueue();
    const polling = client.send(new ReceiveMessageCommand({ QueueUrl: url, WaitTimeSeconds: 20 }));
    await new Promise((r) => setTimeout(r, 20));
    await client.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'wake' }));
    const got = await polling;
    expect(got.Messages?.[0]?.Body).toBe('wake');
  });
});
