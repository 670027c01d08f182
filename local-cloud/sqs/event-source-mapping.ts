import { randomUUID } from 'node:crypto';
import type { Context, SQSBatchResponse, SQSEvent, SQSMessageAttributes, SQSRecord } from 'aws-lambda';
import { partitionIdOfRegion } from '../../shared/domain/partition.js';
import type { Logger } from '../../shared/log.js';
import { silentLogger } from '../../shared/log.js';
import type { SimScheduler } from '../events/scheduler.js';
import type { MessageAttributeValue } from './md5.js';
import type { ReceivedMessage } from './message.js';
import type { Queue } from './queue.js';

/** SQS's longest visibility timeout (12 h): what `holdWhileRunning` sets while an invocation runs. */
const MAX_VISIBILITY_S = 43_200;

/** Nothing (every record succeeded) or a partial batch response, as a Lambda handler returns. */
// biome-ignore lint/suspicious/noConfusingVoidType: handlers typed `Promise<void>` must be accepted as they are.
export type SqsHandlerResult = SQSBatchResponse | undefined | void;

export type SqsHandler = (event: SQSEvent, context: Context) => Promise<SqsHandlerResult> | SqsHandlerResult;

export interface EventSourceMappingOptions {
  readonly queue: Queue;
  readonly handler: SqsHandler;
  readonly scheduler: SimScheduler;
  readonly region: string;
  readonly accountId: string;
  readonly functionName?: string;
  /** Records per invocation, 1–10000 (more than 10 needs a batching window, as Lambda requires). */
  readonly batchSize?: number;
  /** How long to gather records before invoking, 0–300 s. */
  readonly maximumBatchingWindowS?: number;
  /** Concurrent invocations, 2–1000 as Lambda's ScalingConfig.MaximumConcurrency. */
  readonly maximumConcurrency?: number;
  /**
   * Simulated seconds an invocation may run (default 900, Lambda's maximum). Scaled like every duration, while
   * the handler's own work runs in real time: with timeScale 0.01 a 30 s timeout is 0.3 real seconds.
   */
  readonly functionTimeoutS?: number;
  /**
   * Keeps a batch invisible while its invocation runs; its failed records return one visibility timeout after
   * the invocation ends. AWS refuses a mapping whose queue's visibility timeout is shorter than the function
   * timeout, so a record is never received again mid-invocation there; a local cloud that needs a function
   * timeout above its visibility timeout (it cannot freeze a timed-out invocation) keeps that guarantee with
   * this, which a loaded machine's slow invocations would otherwise break (copies circulating to the DLQ).
   */
  readonly holdWhileRunning?: boolean;
  /** FunctionResponseTypes: ['ReportBatchItemFailures']; without it any failure fails the whole batch. */
  readonly reportBatchItemFailures?: boolean;
  readonly log?: Logger;
}

export interface EventSourceMappingStats {
  readonly invocations: number;
  readonly failedInvocations: number;
  readonly recordsDeleted: number;
  readonly recordsFailed: number;
  /** Deletes that found the record received again by another poller (it stays in the queue). */
  readonly staleDeletes: number;
  readonly inFlightInvocations: number;
}

function lambdaAttributes(attributes: Readonly<Record<string, MessageAttributeValue>>): SQSMessageAttributes {
  const out: SQSMessageAttributes = {};
  for (const [name, value] of Object.entries(attributes)) {
    out[name] = {
      dataType: value.DataType,
      ...(value.StringValue !== undefined ? { stringValue: value.StringValue } : {}),
      ...(value.BinaryValue !== undefined ? { binaryValue: Buffer.from(value.BinaryValue).toString('base64') } : {}),
      stringListValues: [],
      binaryListValues: [],
    };
  }
  return out;
}

export function toSqsRecord(message: ReceivedMessage, queueArn: string, region: string): SQSRecord {
  const a = message.attributes;
  return {
    messageId: message.messageId,
    receiptHandle: message.receiptHandle,
    body: message.body,
    attributes: {
      ApproximateReceiveCount: a['ApproximateReceiveCount'] ?? '1',
      SentTimestamp: a['SentTimestamp'] ?? '0',
      SenderId: a['SenderId'] ?? '',
      ApproximateFirstReceiveTimestamp: a['ApproximateFirstReceiveTimestamp'] ?? '0',
      ...(a['DeadLetterQueueSourceArn'] ? { DeadLetterQueueSourceArn: a['DeadLetterQueueSourceArn'] } : {}),
    },
    messageAttributes: lambdaAttributes(message.messageAttributes),
    md5OfBody: message.md5OfBody,
    ...(message.md5OfMessageAttributes ? { md5OfMessageAttributes: message.md5OfMessageAttributes } : {}),
    eventSource: 'aws:sqs',
    eventSourceARN: queueArn,
    awsRegion: region,
  };
}

/**
 * Lambda's SQS event source mapping: pollers long-poll the queue, gather up to `batchSize` records within
 * the batching window, invoke the handler with the real SQSEvent shape, and delete what succeeded. A throw,
 * a timeout or a malformed `batchItemFailures` fails the whole batch; listed failures (with
 * ReportBatchItemFailures) stay in the queue and come back after their visibility timeout, so the queue's
 * redrive policy decides when they go to the DLQ — exactly the path production takes.
 */
export class EventSourceMapping {
  readonly uuid = randomUUID();
  private readonly abort = new AbortController();
  private readonly workers: Promise<void>[] = [];
  private counters = {
    invocations: 0,
    failedInvocations: 0,
    recordsDeleted: 0,
    recordsFailed: 0,
    staleDeletes: 0,
    inFlight: 0,
  };
  private readonly batchSize: number;
  private readonly windowS: number;
  private readonly functionName: string;
  private readonly log: Logger;
  /** Set while the mapping is disabled (UpdateEventSourceMapping Enabled=false); resolved on enable. */
  private disabled: { promise: Promise<void>; resume: () => void } | undefined;

  constructor(private readonly options: EventSourceMappingOptions) {
    this.batchSize = options.batchSize ?? 10;
    this.windowS = options.maximumBatchingWindowS ?? 0;
    if (!Number.isInteger(this.batchSize) || this.batchSize < 1 || this.batchSize > 10_000) {
      throw new RangeError(`batchSize must be 1..10000, got ${this.batchSize}`);
    }
    if (this.batchSize > 10 && this.windowS < 1) {
      throw new RangeError('a batchSize above 10 needs a maximumBatchingWindowS of at least 1, as Lambda requires');
    }
    if (this.windowS < 0 || this.windowS > 300) throw new RangeError(`maximumBatchingWindowS must be 0..300`);
    const concurrency = options.maximumConcurrency ?? 2;
    if (!Number.isInteger(concurrency) || concurrency < 2 || concurrency > 1000) {
      throw new RangeError(`maximumConcurrency must be 2..1000, got ${concurrency}`);
    }
    this.functionName = options.functionName ?? `local-${options.queue.name}-consumer`;
    this.log = (options.log ?? silentLogger).child({ esm: this.uuid, queue: options.queue.name });
    for (let i = 0; i < concurrency; i += 1) this.workers.push(this.poll());
  }

  stats(): EventSourceMappingStats {
    const { inFlight, ...rest } = this.counters;
    return { ...rest, inFlightInvocations: inFlight };
  }

  /** Stops polling and waits for running invocations to finish (their results are still applied). */
  async stop(): Promise<void> {
    this.abort.abort();
    this.disabled?.resume();
    await Promise.all(this.workers);
  }

  /**
   * Enabled=false / true, as UpdateEventSourceMapping: a disabled mapping receives nothing (a Lambda outage, as
   * chaos needs it); invocations already running finish.
   */
  setEnabled(enabled: boolean): void {
    if (!enabled && !this.disabled) {
      let resume = (): void => {};
      const promise = new Promise<void>((r) => {
        resume = r;
      });
      this.disabled = { promise, resume };
    } else if (enabled && this.disabled) {
      this.disabled.resume();
      this.disabled = undefined;
    }
  }

  /** Resolves at once while enabled, otherwise when enabled again. */
  private enabled(): Promise<void> {
    return this.disabled?.promise ?? Promise.resolve();
  }

  private async poll(): Promise<void> {
    const { queue, scheduler } = this.options;
    const signal = this.abort.signal;
    while (!signal.aborted) {
      if (this.disabled) {
        await this.disabled.promise;
        continue;
      }
      let messages: ReceivedMessage[];
      try {
        messages = await queue.receive({ maxMessages: Math.min(10, this.batchSize), waitTimeS: 20, signal });
        if (messages.length > 0 && messages.length < this.batchSize && this.windowS > 0) {
          const deadlineMs = scheduler.clock.nowMs() + scheduler.realMs(this.windowS * 1000);
          while (messages.length < this.batchSize && !signal.aborted) {
            if (scheduler.clock.nowMs() >= deadlineMs) break;
            const leftS = Math.floor((deadlineMs - scheduler.clock.nowMs()) / scheduler.realMs(1000));
            const more = await queue.receive({
              maxMessages: Math.min(10, this.batchSize - messages.length),
              waitTimeS: Math.min(20, Math.max(0, leftS)),
              signal,
            });
            messages = messages.concat(more);
            if (more.length === 0 && leftS === 0) break;
          }
        }
      } catch (err) {
        // A deleted queue or a closed engine: back off and try again until stopped, like Lambda's pollers.
        this.log.warn('failed to receive from queue', { err });
        await scheduler.sleep(1000, signal);
        continue;
      }
      if (messages.length === 0) continue;
      // A long poll that was under way when the mapping was disabled: hold its batch, invoke nothing meanwhile.
      await this.enabled();
      await this.invoke(messages);
    }
  }

  private async invoke(messages: ReceivedMessage[]): Promise<void> {
    const { queue, scheduler, region, handler } = this.options;
    const event: SQSEvent = { Records: messages.map((m) => toSqsRecord(m, queue.arn, region)) };
    const timeoutS = this.options.functionTimeoutS ?? 900;
    const startedMs = scheduler.clock.nowMs();
    const context: Context = {
      callbackWaitsForEmptyEventLoop: true,
      functionName: this.functionName,
      functionVersion: '$LATEST',
      invokedFunctionArn: `arn:${partitionIdOfRegion(region)}:lambda:${region}:${this.options.accountId}:function:${this.functionName}`,
      memoryLimitInMB: '128',
      awsRequestId: randomUUID(),
      logGroupName: `/aws/lambda/${this.functionName}`,
      logStreamName: `local/[$LATEST]${this.uuid.replace(/-/g, '')}`,
      getRemainingTimeInMillis: () => {
        const leftRealMs = startedMs + scheduler.realMs(timeoutS * 1000) - scheduler.clock.nowMs();
        if (scheduler.timeScale === 0) return timeoutS * 1000;
        return Math.max(0, Math.round(leftRealMs / scheduler.timeScale));
      },
      done: () => {},
      fail: () => {},
      succeed: () => {},
    };
    this.counters.invocations += 1;
    this.counters.inFlight += 1;
    if (this.options.holdWhileRunning) this.setVisibility(messages, MAX_VISIBILITY_S);
    let failedIds: Set<string> | 'all';
    try {
      const timedOut = Symbol('timeout');
      const cancelTimer = new AbortController();
      const result = await Promise.race([
        Promise.resolve().then(() => handler(event, context)),
        scheduler.sleep(timeoutS * 1000, cancelTimer.signal).then(() => timedOut),
      ]);
      cancelTimer.abort();
      if (result === timedOut) throw new Error(`Task timed out after ${timeoutS} seconds`);
      failedIds = this.failedIds(result as SQSBatchResponse | undefined, event);
    } catch (err) {
      this.log.warn('invocation failed; the whole batch returns to the queue', { err, records: messages.length });
      failedIds = 'all';
    } finally {
      this.counters.inFlight -= 1;
    }
    if (this.options.holdWhileRunning) {
      const failed = failedIds === 'all' ? messages : messages.filter((m) => failedIds.has(m.messageId));
      this.setVisibility(failed, queue.settings.visibilityTimeoutS);
    }
    if (failedIds === 'all') {
      this.counters.failedInvocations += 1;
      this.counters.recordsFailed += messages.length;
      return;
    }
    for (const message of messages) {
      if (failedIds.has(message.messageId)) {
        this.counters.recordsFailed += 1;
        continue;
      }
      try {
        // False when the record was received again meanwhile (visibility timeout shorter than the
        // invocation): SQS keeps the message, as it does for Lambda.
        if (queue.delete(message.receiptHandle)) this.counters.recordsDeleted += 1;
        else this.counters.staleDeletes += 1;
      } catch (err) {
        this.log.warn('failed to delete processed record', { err, messageId: message.messageId });
      }
    }
  }

  /** ChangeMessageVisibility on each message still held by this receive (others were deleted or expired). */
  private setVisibility(messages: readonly ReceivedMessage[], visibilityTimeoutS: number): void {
    for (const message of messages) {
      try {
        this.options.queue.changeVisibility(message.receiptHandle, visibilityTimeoutS);
      } catch (err) {
        this.log.warn("could not change a record's visibility", { err, messageId: message.messageId });
      }
    }
  }

  /** Lambda's rules: an empty or unknown itemIdentifier fails the whole batch. */
  private failedIds(result: SQSBatchResponse | undefined, event: SQSEvent): Set<string> | 'all' {
    const failures = result?.batchItemFailures;
    if (!this.options.reportBatchItemFailures && this.options.reportBatchItemFailures !== undefined) return new Set();
    if (failures === undefined || failures === null) return new Set();
    if (!Array.isArray(failures)) return 'all';
    const known = new Set(event.Records.map((r) => r.messageId));
    const ids = new Set<string>();
    for (const failure of failures) {
      const id = failure?.itemIdentifier;
      if (typeof id !== 'string' || id === '' || !known.has(id)) return 'all';
      ids.add(id);
    }
    return ids;
  }
}
