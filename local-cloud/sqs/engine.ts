import { randomUUID } from 'node:crypto';
import { partitionIdOfRegion } from '../../shared/domain/partition.js';
import type { SimScheduler } from '../events/scheduler.js';
import { sqsErrors } from './errors.js';
import type { QueueHost } from './message.js';
import { Queue } from './queue.js';

export interface SqsEngineOptions {
  readonly scheduler: SimScheduler;
  readonly region: string;
  readonly accountId: string;
  /** Probability that a receive leaves a duplicate of a message behind (at-least-once delivery). */
  readonly duplicateRate?: number;
  /** Seeds the duplicate draws. */
  readonly seed?: number;
}

export type MoveTaskStatus = 'RUNNING' | 'COMPLETED' | 'CANCELLED' | 'FAILED';

export interface MoveTask {
  readonly taskHandle: string;
  readonly sourceArn: string;
  readonly destinationArn: string | undefined;
  readonly maxNumberOfMessagesPerSecond: number | undefined;
  status: MoveTaskStatus;
  approximateNumberOfMessagesMoved: number;
  approximateNumberOfMessagesToMove: number;
  readonly startedTimestampMs: number;
  failureReason?: string;
}

const QUEUE_NAME = /^[A-Za-z0-9_-]{1,80}$/;

/** mulberry32: small, fast, good enough to make injected duplicates reproducible from a seed. */
function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/**
 * The queues of one account and region: create/look up by name, URL or ARN, and DLQ redrive tasks
 * (StartMessageMoveTask). Queue URLs are `<endpoint>/<account>/<name>`; lookups by URL read only the last
 * two path segments, so a URL stays valid whatever host the client used.
 */
export class SqsEngine implements QueueHost {
  readonly scheduler: SimScheduler;
  readonly region: string;
  readonly accountId: string;
  readonly duplicateRate: number;
  readonly random: () => number;
  private readonly queues = new Map<string, Queue>();
  private readonly tasks: MoveTask[] = [];
  private baseUrl = 'http://127.0.0.1';

  constructor(options: SqsEngineOptions) {
    this.scheduler = options.scheduler;
    this.region = options.region;
    this.accountId = options.accountId;
    this.duplicateRate = options.duplicateRate ?? 0;
    this.random = options.seed !== undefined ? seededRandom(options.seed) : Math.random;
  }

  /** Called once the HTTP endpoint listens, so queue URLs point at it. */
  setBaseUrl(url: string): void {
    this.baseUrl = url.replace(/\/$/, '');
  }

  queueUrl(name: string): string {
    return `${this.baseUrl}/${this.accountId}/${name}`;
  }

  queueArn(name: string): string {
    return `arn:${partitionIdOfRegion(this.region)}:sqs:${this.region}:${this.accountId}:${name}`;
  }

  /** Idempotent for equal attributes; differing attributes are QueueAlreadyExists, as in SQS. */
  createQueue(name: string, attributes: Readonly<Record<string, string>> = {}): Queue {
    if (!QUEUE_NAME.test(name)) {
      throw sqsErrors.invalidParameter(
        'Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length',
      );
    }
    const existing = this.queues.get(name);
    if (existing) {
      for (const [key, value] of Object.entries(attributes)) {
        if (existing.configuredAttributes[key] !== value) throw sqsErrors.queueAlreadyExists(key);
      }
      return existing;
    }
    const queue = new Queue(name, this.queueArn(name), () => this.queueUrl(name), attributes, this);
    this.queues.set(name, queue);
    return queue;
  }

  deleteQueue(queue: Queue): void {
    queue.close();
    this.queues.delete(queue.name);
  }

  getQueue(name: string): Queue {
    const queue = this.queues.get(name);
    if (!queue) throw sqsErrors.queueDoesNotExist();
    return queue;
  }

  queueByUrl(url: string): Queue {
    let path: string;
    try {
      path = new URL(url).pathname;
    } catch {
      path = url;
    }
    const [account, name] = path.split('/').filter(Boolean).slice(-2);
    if (account !== this.accountId || name === undefined) throw sqsErrors.queueDoesNotExist();
    return this.getQueue(name);
  }

  queueByArn(arn: string): Queue | undefined {
    const prefix = `arn:${partitionIdOfRegion(this.region)}:sqs:${this.region}:${this.accountId}:`;
    return arn.startsWith(prefix) ? this.queues.get(arn.slice(prefix.length)) : undefined;
  }

  listQueues(prefix = ''): Queue[] {
    return [...this.queues.values()]
      .filter((q) => q.name.startsWith(prefix))
      .sort((a, b) => a.name.localeCompare(b.name));
  }

  /** Queues whose RedrivePolicy names `arn` as their dead-letter queue. */
  deadLetterSources(arn: string): Queue[] {
    return [...this.queues.values()].filter((q) => q.settings.redrive?.deadLetterTargetArn === arn);
  }

  /**
   * Moves the DLQ's visible messages back to `destinationArn`, or each to the queue it was dead-lettered
   * from. Runs in the background at `maxNumberOfMessagesPerSecond` (simulated), like SQS's redrive.
   */
  startMessageMoveTask(sourceArn: string, destinationArn?: string, maxNumberOfMessagesPerSecond?: number): MoveTask {
    const source = this.queueByArn(sourceArn);
    if (!source)
      throw sqsErrors.resourceNotFound("The resource that you specified for the SourceArn parameter doesn't exist.");
    if (this.deadLetterSources(sourceArn).length === 0) {
      throw sqsErrors.invalidParameter('Source queue must be configured as a Dead Letter Queue.');
    }
    if (destinationArn !== undefined && !this.queueByArn(destinationArn)) {
      throw sqsErrors.resourceNotFound(
        "The resource that you specified for the DestinationArn parameter doesn't exist.",
      );
    }
    if (
      maxNumberOfMessagesPerSecond !== undefined &&
      (maxNumberOfMessagesPerSecond < 1 || maxNumberOfMessagesPerSecond > 500)
    ) {
      throw sqsErrors.invalidParameter(
        'Value for parameter MaxNumberOfMessagesPerSecond is invalid. Reason: Must be between 1 and 500.',
      );
    }
    if (this.tasks.some((t) => t.sourceArn === sourceArn && t.status === 'RUNNING')) {
      throw sqsErrors.unsupportedOperation(
        'There is already a task running. Only one active task is allowed for a source queue arn at a given time.',
      );
    }
    const task: MoveTask = {
      taskHandle: Buffer.from(JSON.stringify({ taskId: randomUUID(), sourceArn })).toString('base64'),
      sourceArn,
      destinationArn,
      maxNumberOfMessagesPerSecond,
      status: 'RUNNING',
      approximateNumberOfMessagesMoved: 0,
      approximateNumberOfMessagesToMove: source.counts().visible,
      startedTimestampMs: this.scheduler.clock.nowMs(),
    };
    this.tasks.push(task);
    const step = (): void => {
      if (task.status !== 'RUNNING') return;
      const batch = source.takeForMove(maxNumberOfMessagesPerSecond ?? 500);
      for (const message of batch) {
        const target = destinationArn ?? message.deadLetterSourceArn;
        const queue = target ? this.queueByArn(target) : undefined;
        if (!queue) {
          // The original source is gone: keep the message in the DLQ and stop, as SQS fails the task.
          source.acceptMoved(message);
          task.status = 'FAILED';
          task.failureReason = 'AWS.SimpleQueueService.NonExistentQueue';
          return;
        }
        queue.acceptMoved({ body: message.body, messageAttributes: message.messageAttributes });
        task.approximateNumberOfMessagesMoved += 1;
      }
      if (batch.length === 0) task.status = 'COMPLETED';
      else this.scheduler.after(1000, step);
    };
    this.scheduler.after(0, step);
    return task;
  }

  cancelMessageMoveTask(taskHandle: string): MoveTask {
    const task = this.tasks.find((t) => t.taskHandle === taskHandle);
    if (task?.status !== 'RUNNING') throw sqsErrors.resourceNotFound('Task does not exist or is not running.');
    task.status = 'CANCELLED';
    return task;
  }

  listMessageMoveTasks(sourceArn: string, maxResults = 1): MoveTask[] {
    return this.tasks
      .filter((t) => t.sourceArn === sourceArn)
      .reverse()
      .slice(0, maxResults);
  }

  close(): void {
    for (const task of this.tasks) if (task.status === 'RUNNING') task.status = 'CANCELLED';
    for (const queue of this.queues.values()) queue.close();
  }
}
