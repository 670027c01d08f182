import { randomBytes, randomUUID } from 'node:crypto';
import { sqsErrors } from './errors.js';
import type { MessageAttributeValue } from './md5.js';
import { md5Hex, md5OfMessageAttributes } from './md5.js';
import type {
  QueueCounts,
  QueueHost,
  ReceivedMessage,
  ReceiveInput,
  SendInput,
  SendResult,
  StoredMessage,
} from './message.js';
import type { QueueSettings } from './queue-attributes.js';
import { DEFAULT_QUEUE_ATTRIBUTES, parseQueueSettings, validateAttributeNames } from './queue-attributes.js';

const SENDER_ID = 'AIDALOCALCLOUDSENDER';

/**
 * One standard queue with SQS's semantics: DelaySeconds, a visibility timeout per receive, receive counts,
 * redrive to the dead-letter queue when a message that was received maxReceiveCount times becomes visible
 * again, retention, purge, and at-least-once delivery (a receive may leave a duplicate behind, at the engine's
 * `duplicateRate` or by `injectDuplicate`). Order is send order, which standard queues allow but do not promise.
 *
 * Deadlines are real milliseconds on the scheduler's clock; durations are scaled by its timeScale.
 */
export class Queue {
  private readonly messages = new Map<string, StoredMessage>();
  private readonly receipts = new Map<string, string>();
  private readonly waiters = new Set<() => void>();
  private rawAttributes: Record<string, string>;
  private settingsValue: QueueSettings;
  private lastPurgeMs: number | undefined;
  private sequence = 0;
  readonly createdMs: number;
  private lastModifiedMs: number;

  constructor(
    readonly name: string,
    readonly arn: string,
    readonly url: () => string,
    attributes: Readonly<Record<string, string>>,
    private readonly host: QueueHost,
  ) {
    validateAttributeNames(attributes);
    this.rawAttributes = { ...DEFAULT_QUEUE_ATTRIBUTES, ...attributes };
    this.settingsValue = parseQueueSettings(this.rawAttributes);
    this.createdMs = this.nowMs();
    this.lastModifiedMs = this.createdMs;
  }

  get settings(): QueueSettings {
    return this.settingsValue;
  }

  /** The attributes as given (defaults filled in), for comparing on CreateQueue. */
  get configuredAttributes(): Readonly<Record<string, string>> {
    return this.rawAttributes;
  }

  setAttributes(attributes: Readonly<Record<string, string>>): void {
    validateAttributeNames(attributes);
    const next = { ...this.rawAttributes, ...attributes };
    this.settingsValue = parseQueueSettings(next);
    this.rawAttributes = next;
    this.lastModifiedMs = this.nowMs();
    this.notify();
  }

  /** GetQueueAttributes' view: the configured attributes plus the computed ones. */
  attributes(): Record<string, string> {
    const counts = this.counts();
    return {
      ...this.rawAttributes,
      QueueArn: this.arn,
      ApproximateNumberOfMessages: String(counts.visible),
      ApproximateNumberOfMessagesNotVisible: String(counts.inFlight),
      ApproximateNumberOfMessagesDelayed: String(counts.delayed),
      CreatedTimestamp: String(Math.floor(this.createdMs / 1000)),
      LastModifiedTimestamp: String(Math.floor(this.lastModifiedMs / 1000)),
    };
  }

  counts(): QueueCounts {
    this.expire();
    const now = this.nowMs();
    let visible = 0;
    let inFlight = 0;
    let delayed = 0;
    for (const message of this.messages.values()) {
      if (message.visibleAtMs <= now) visible += 1;
      else if (message.receiptHandle !== undefined) inFlight += 1;
      else delayed += 1;
    }
    return { visible, inFlight, delayed };
  }

  send(input: SendInput): SendResult {
    const delayS = input.delayS ?? this.settingsValue.delayS;
    if (!Number.isInteger(delayS) || delayS < 0 || delayS > 900) {
      throw sqsErrors.invalidParameter(
        `Value ${delayS} for parameter DelaySeconds is invalid. Reason: must be between 0 and 900, if provided.`,
      );
    }
    const size = Buffer.byteLength(input.body, 'utf8');
    if (size === 0) throw sqsErrors.missingParameter('MessageBody');
    if (size > this.settingsValue.maximumMessageSizeBytes) {
      throw sqsErrors.invalidParameter(
        `One or more parameters are invalid. Reason: Message must be shorter than ${this.settingsValue.maximumMessageSizeBytes} bytes.`,
      );
    }
    const messageAttributes = input.messageAttributes ?? {};
    const stored = this.store({
      messageId: randomUUID(),
      body: input.body,
      messageAttributes,
      sentTimestampMs: this.nowMs(),
      delayS,
      deadLetterSourceArn: undefined,
    });
    return {
      messageId: stored.messageId,
      md5OfBody: stored.md5OfBody,
      ...(stored.md5OfMessageAttributes ? { md5OfMessageAttributes: stored.md5OfMessageAttributes } : {}),
    };
  }

  /** Receives up to `maxMessages` (1–10); with `waitTimeS` > 0 waits (long polling) until one is available. */
  async receive(input: ReceiveInput = {}): Promise<ReceivedMessage[]> {
    const maxMessages = input.maxMessages ?? 1;
    if (!Number.isInteger(maxMessages) || maxMessages < 1 || maxMessages > 10) {
      throw sqsErrors.invalidParameter(
        `Value ${maxMessages} for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.`,
      );
    }
    const visibilityTimeoutS = input.visibilityTimeoutS ?? this.settingsValue.visibilityTimeoutS;
    if (!Number.isInteger(visibilityTimeoutS) || visibilityTimeoutS < 0 || visibilityTimeoutS > 43_200) {
      throw sqsErrors.invalidParameter(`Value ${visibilityTimeoutS} for parameter VisibilityTimeout is invalid.`);
    }
    const waitTimeS = input.waitTimeS ?? this.settingsValue.receiveWaitS;
    if (!Number.isInteger(waitTimeS) || waitTimeS < 0 || waitTimeS > 20) {
      throw sqsErrors.invalidParameter(
        `Value ${waitTimeS} for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.`,
      );
    }
    const deadlineMs = this.nowMs() + this.host.scheduler.realMs(waitTimeS * 1000);
    for (;;) {
      const taken = this.take(maxMessages, visibilityTimeoutS);
      if (taken.length > 0 || this.nowMs() >= deadlineMs || input.signal?.aborted) return taken;
      await this.waitForChange(deadlineMs, input.signal);
    }
  }

  /**
   * Deletes by the latest receipt handle and returns true; an older handle of the same message (it was
   * received again since) or of a message already gone succeeds without deleting anything and returns false.
   */
  delete(receiptHandle: string): boolean {
    const key = this.receipts.get(receiptHandle);
    if (key === undefined) throw sqsErrors.receiptHandleIsInvalid(receiptHandle);
    const message = this.messages.get(key);
    // The handle stays known: deleting an already deleted message succeeds, as in SQS.
    if (message?.receiptHandle !== receiptHandle) return false;
    this.messages.delete(key);
    return true;
  }

  changeVisibility(receiptHandle: string, visibilityTimeoutS: number): void {
    if (!Number.isInteger(visibilityTimeoutS) || visibilityTimeoutS < 0 || visibilityTimeoutS > 43_200) {
      throw sqsErrors.invalidParameter(`Value ${visibilityTimeoutS} for parameter VisibilityTimeout is invalid.`);
    }
    const key = this.receipts.get(receiptHandle);
    if (key === undefined) throw sqsErrors.receiptHandleIsInvalid(receiptHandle);
    const message = this.messages.get(key);
    if (message === undefined || message.receiptHandle !== receiptHandle || message.visibleAtMs <= this.nowMs()) {
      throw sqsErrors.messageNotInflight();
    }
    message.visibleAtMs = this.nowMs() + this.host.scheduler.realMs(visibilityTimeoutS * 1000);
    this.notify();
  }

  /** One purge per 60 s (simulated), as SQS allows. */
  purge(): void {
    const now = this.nowMs();
    if (this.lastPurgeMs !== undefined && now - this.lastPurgeMs < this.host.scheduler.realMs(60_000)) {
      throw sqsErrors.purgeQueueInProgress(this.arn);
    }
    this.lastPurgeMs = now;
    this.messages.clear();
    this.receipts.clear();
  }

  /** At-least-once made visible: leaves a second copy (same MessageId and body) that is delivered again. */
  injectDuplicate(messageId: string): boolean {
    const original = [...this.messages.values()].find((m) => m.messageId === messageId);
    if (!original) return false;
    this.duplicate(original);
    return true;
  }

  /** Removes up to `limit` visible messages for a redrive task; in-flight ones stay until they return. */
  takeForMove(limit: number): {
    body: string;
    messageAttributes: Readonly<Record<string, MessageAttributeValue>>;
    deadLetterSourceArn: string | undefined;
  }[] {
    this.expire();
    const now = this.nowMs();
    const out = [];
    for (const message of this.messages.values()) {
      if (out.length >= limit) break;
      if (message.visibleAtMs > now) continue;
      this.forget(message);
      out.push({
        body: message.body,
        messageAttributes: message.messageAttributes,
        deadLetterSourceArn: message.deadLetterSourceArn,
      });
    }
    return out;
  }

  /** Enqueues a message moved from another queue (redrive to a DLQ keeps its id and sent time, as SQS does). */
  acceptMoved(input: {
    messageId?: string;
    body: string;
    messageAttributes: Readonly<Record<string, MessageAttributeValue>>;
    sentTimestampMs?: number;
    deadLetterSourceArn?: string;
  }): void {
    this.store({
      messageId: input.messageId ?? randomUUID(),
      body: input.body,
      messageAttributes: input.messageAttributes,
      sentTimestampMs: input.sentTimestampMs ?? this.nowMs(),
      delayS: 0,
      deadLetterSourceArn: input.deadLetterSourceArn,
    });
  }

  /** Wakes long polls so they return promptly on shutdown. */
  close(): void {
    for (const wake of [...this.waiters]) wake();
  }

  private nowMs(): number {
    return this.host.scheduler.clock.nowMs();
  }

  private store(input: {
    messageId: string;
    body: string;
    messageAttributes: Readonly<Record<string, MessageAttributeValue>>;
    sentTimestampMs: number;
    delayS: number;
    deadLetterSourceArn: string | undefined;
  }): StoredMessage {
    const now = this.nowMs();
    this.sequence += 1;
    const stored: StoredMessage = {
      key: `${this.sequence}`,
      messageId: input.messageId,
      body: input.body,
      md5OfBody: md5Hex(input.body),
      messageAttributes: input.messageAttributes,
      md5OfMessageAttributes: md5OfMessageAttributes(input.messageAttributes),
      sentTimestampMs: input.sentTimestampMs,
      expiresAtMs: input.sentTimestampMs + this.host.scheduler.realMs(this.settingsValue.retentionS * 1000),
      deadLetterSourceArn: input.deadLetterSourceArn,
      visibleAtMs: now + this.host.scheduler.realMs(input.delayS * 1000),
      receiveCount: 0,
      firstReceiveMs: undefined,
      receiptHandle: undefined,
    };
    this.messages.set(stored.key, stored);
    this.notify();
    return stored;
  }

  private take(maxMessages: number, visibilityTimeoutS: number): ReceivedMessage[] {
    this.expire();
    const now = this.nowMs();
    const redrive = this.settingsValue.redrive;
    const deadLetterQueue = redrive ? this.host.queueByArn(redrive.deadLetterTargetArn) : undefined;
    const out: ReceivedMessage[] = [];
    for (const message of [...this.messages.values()]) {
      if (out.length >= maxMessages) break;
      if (message.visibleAtMs > now) continue;
      if (redrive && deadLetterQueue && message.receiveCount >= redrive.maxReceiveCount) {
        this.forget(message);
        deadLetterQueue.acceptMoved({
          messageId: message.messageId,
          body: message.body,
          messageAttributes: message.messageAttributes,
          sentTimestampMs: message.sentTimestampMs,
          deadLetterSourceArn: this.arn,
        });
        continue;
      }
      const receiptHandle = randomBytes(48).toString('base64');
      message.receiptHandle = receiptHandle;
      this.receipts.set(receiptHandle, message.key);
      message.receiveCount += 1;
      message.firstReceiveMs ??= now;
      message.visibleAtMs = now + this.host.scheduler.realMs(visibilityTimeoutS * 1000);
      out.push(this.view(message, receiptHandle));
      if (this.host.duplicateRate > 0 && this.host.random() < this.host.duplicateRate) this.duplicate(message);
    }
    if (out.length > 0 && visibilityTimeoutS === 0) this.notify();
    return out;
  }

  private view(message: StoredMessage, receiptHandle: string): ReceivedMessage {
    return {
      messageId: message.messageId,
      receiptHandle,
      body: message.body,
      md5OfBody: message.md5OfBody,
      ...(message.md5OfMessageAttributes ? { md5OfMessageAttributes: message.md5OfMessageAttributes } : {}),
      messageAttributes: message.messageAttributes,
      attributes: {
        SenderId: SENDER_ID,
        SentTimestamp: String(message.sentTimestampMs),
        ApproximateReceiveCount: String(message.receiveCount),
        ApproximateFirstReceiveTimestamp: String(message.firstReceiveMs ?? this.nowMs()),
        ...(message.deadLetterSourceArn ? { DeadLetterQueueSourceArn: message.deadLetterSourceArn } : {}),
      },
    };
  }

  private duplicate(original: StoredMessage): void {
    this.sequence += 1;
    const copy: StoredMessage = {
      ...original,
      key: `${this.sequence}`,
      visibleAtMs: this.nowMs(),
      receiptHandle: undefined,
    };
    this.messages.set(copy.key, copy);
    this.notify();
  }

  private forget(message: StoredMessage): void {
    this.messages.delete(message.key);
  }

  private expire(): void {
    const now = this.nowMs();
    for (const message of this.messages.values()) {
      if (message.expiresAtMs <= now) this.messages.delete(message.key);
    }
    // Receipt handles of deleted messages stay valid for DeleteMessage (it is idempotent in SQS), but the map
    // must not grow forever: drop handles of messages long gone once it gets large.
    if (this.receipts.size > 10 * (this.messages.size + 100)) {
      for (const [handle, key] of this.receipts) if (!this.messages.has(key)) this.receipts.delete(handle);
    }
  }

  private notify(): void {
    for (const wake of [...this.waiters]) wake();
  }

  private nextVisibleAtMs(): number | undefined {
    let next: number | undefined;
    for (const message of this.messages.values()) {
      if (next === undefined || message.visibleAtMs < next) next = message.visibleAtMs;
    }
    return next;
  }

  private waitForChange(deadlineMs: number, signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve) => {
      const next = this.nextVisibleAtMs();
      const untilMs = Math.max(0, Math.min(deadlineMs, next ?? deadlineMs) - this.nowMs());
      let timer: NodeJS.Timeout | undefined;
      const wake = (): void => {
        if (timer) clearTimeout(timer);
        this.waiters.delete(wake);
        signal?.removeEventListener('abort', wake);
        resolve();
      };
      // A real timer (not the scheduler's): deadlines are already in real milliseconds.
      timer = setTimeout(wake, untilMs + 1);
      this.waiters.add(wake);
      signal?.addEventListener('abort', wake, { once: true });
    });
  }
}
