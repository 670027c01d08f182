import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { type HeldTicket, withEc2CallContext } from '../ec2/ec2-call-context.js';
import type { Ec2Instance } from '../ec2/port.js';
import { BatchAttachedEnis, withPrefetchedInstance } from '../ec2/prefetched-ec2.js';
import { errorMessage } from '../errors.js';
import { processSqsBatch } from '../queue/batch.js';
import type { LifecycleDeps } from './deps.js';
import { type LifecycleEvent, parseLifecycleEvent } from './events.js';
import { createLifecycleEventHandler, createLifecycleRecordHandler } from './record-handler.js';

export type SqsBatchHandler = (event: SQSEvent) => Promise<SQSBatchResponse>;

export interface LifecycleBatchOptions {
  /**
   * How long a record's EC2 calls may sleep for rate-budget tokens, from the start of the invocation
   * (default 4 s): past it a call defers and the launch is re-enqueued with a heartbeat. Short, because an
   * invocation lasts as long as its slowest record, and the queue must be drained fast enough that every
   * launch event is picked up (and heartbeats) within the hook's heartbeat timeout: with 5 invocations of
   * 10 records, 1,000 events need invocations of well under 15 s (measured: a 15 s bound let 20 of 1,000
   * hooks time out before their first pickup).
   */
  readonly budgetWaitMs?: number;
}

interface Parsed {
  readonly record: SQSRecord;
  /** Undefined when the body is malformed: the record handler then parses it and reports why. */
  readonly event?: LifecycleEvent;
  readonly arrivalMs: number;
  readonly launchOf?: string;
  readonly tickets?: Readonly<Record<string, readonly HeldTicket[]>>;
}

/**
 * The whole Lambda behind one line: each SQS record through the record handler, then metrics flushed.
 * Before the records run, one DescribeInstances serves every launch of the batch (instead of one per
 * record), and the adoptions among them share one DescribeNetworkInterfaces (BatchAttachedEnis); the records
 * then run oldest event first, and their EC2 calls take budget tokens in that order.
 */
export function createLifecycleBatchHandler(deps: LifecycleDeps, options: LifecycleBatchOptions = {}): SqsBatchHandler {
  const budgetWaitMs = options.budgetWaitMs ?? 4_000;
  return async (event) => {
    try {
      const parsed = (event.Records ?? []).map(parse).sort((a, b) => a.arrivalMs - b.arrivalMs);
      const instances = await prefetch(deps, parsed);
      const attached = instances && BatchAttachedEnis.of(deps.ec2, instances, deps.logger);
      const deadlineMs = deps.clock.nowMs() + budgetWaitMs;
      const byMessage = new Map(parsed.map((p) => [p.record.messageId, p]));
      const depsFor = (p: Parsed | undefined): LifecycleDeps => {
        const id = p?.launchOf;
        if (!instances || id === undefined || !instances.has(id)) return deps;
        return { ...deps, ec2: withPrefetchedInstance(deps.ec2, id, instances.get(id), attached) };
      };
      return await processSqsBatch(
        { Records: parsed.map((p) => p.record) },
        (record) => {
          const p = byMessage.get(record.messageId);
          const context = { arrivalMs: p?.arrivalMs ?? 0, deadlineMs, ...(p?.tickets ? { tickets: p.tickets } : {}) };
          const event = p?.event;
          return withEc2CallContext(context, () =>
            event
              ? createLifecycleEventHandler(depsFor(p))(event)
              : createLifecycleRecordHandler(depsFor(p))(record.body),
          );
        },
        { logger: deps.logger },
      );
    } finally {
      deps.metrics?.flush();
    }
  };
}

function parse(record: SQSRecord): Parsed {
  try {
    const event = parseLifecycleEvent(record.body);
    if (event.kind === 'ignored') return { record, event, arrivalMs: 0 };
    return {
      record,
      event,
      arrivalMs: event.timeMs,
      ...(event.kind === 'launch' ? { launchOf: event.instanceId } : {}),
      ...(event.retry.tickets ? { tickets: event.retry.tickets } : {}),
    };
  } catch {
    // The record handler reports a malformed body itself; here it only goes first.
    return { record, arrivalMs: 0 };
  }
}

/** One DescribeInstances for the launches of the batch; undefined (each record describes alone) if it fails. */
async function prefetch(
  deps: LifecycleDeps,
  parsed: readonly Parsed[],
): Promise<ReadonlyMap<string, Ec2Instance | undefined> | undefined> {
  const ids = [...new Set(parsed.flatMap((p) => (p.launchOf ? [p.launchOf] : [])))];
  if (ids.length === 0) return undefined;
  try {
    const found = await withEc2CallContext({ arrivalMs: Math.min(...parsed.map((p) => p.arrivalMs)) }, () =>
      deps.ec2.describeInstances(ids),
    );
    // Absent from the answer = not visible yet: the record's own wait says so, as one describe would.
    return new Map(ids.map((id) => [id, found.get(id)]));
  } catch (err) {
    deps.logger.warn('batch DescribeInstances failed; each launch describes its own instance', {
      instances: ids.length,
      err: errorMessage(err),
    });
    return undefined;
  }
}
