import type { SimScheduler } from '../events/scheduler.js';
import type { MessageAttributeValue } from './md5.js';
import type { Queue } from './queue.js';

/** The shapes a queue takes in and hands out, and what it needs from its engine. */
export interface SendInput {
  readonly body: string;
  readonly delayS?: number;
  readonly messageAttributes?: Readonly<Record<string, MessageAttributeValue>>;
}

export interface SendResult {
  readonly messageId: string;
  readonly md5OfBody: string;
  readonly md5OfMessageAttributes?: string;
}

/** A message as one receive sees it. */
export interface ReceivedMessage {
  readonly messageId: string;
  readonly receiptHandle: string;
  readonly body: string;
  readonly md5OfBody: string;
  readonly md5OfMessageAttributes?: string;
  readonly messageAttributes: Readonly<Record<string, MessageAttributeValue>>;
  /** System attributes as strings, as SQS returns them (all of them; callers filter). */
  readonly attributes: Readonly<Record<string, string>>;
}

export interface ReceiveInput {
  readonly maxMessages?: number;
  readonly visibilityTimeoutS?: number;
  readonly waitTimeS?: number;
  readonly signal?: AbortSignal;
}

export interface StoredMessage {
  readonly key: string;
  readonly messageId: string;
  readonly body: string;
  readonly md5OfBody: string;
  readonly messageAttributes: Readonly<Record<string, MessageAttributeValue>>;
  readonly md5OfMessageAttributes: string | undefined;
  readonly sentTimestampMs: number;
  readonly expiresAtMs: number;
  readonly deadLetterSourceArn: string | undefined;
  visibleAtMs: number;
  receiveCount: number;
  firstReceiveMs: number | undefined;
  receiptHandle: string | undefined;
}

export interface QueueCounts {
  readonly visible: number;
  readonly inFlight: number;
  readonly delayed: number;
}

/** What a queue needs from the engine: finding its dead-letter queue by ARN. */
export interface QueueHost {
  readonly scheduler: SimScheduler;
  queueByArn(arn: string): Queue | undefined;
  /** A uniform [0, 1) draw; the engine seeds it so injected duplicates are reproducible. */
  random(): number;
  readonly duplicateRate: number;
}
