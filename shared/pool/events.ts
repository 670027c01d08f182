import type { DynamoDBBatchResponse, DynamoDBRecord, DynamoDBStreamEvent, ScheduledEvent } from 'aws-lambda';
import { A } from '../lease-store/item-codec.js';
import { LEASE_SORT_PREFIX, NODE_SORT_KEY } from '../lease-store/table.js';
import type { PoolDeps } from './deps.js';
import { manageNodePool } from './pool-manager.js';
import { type SweepReport, sweepPools } from './sweep.js';

export type PoolManagerEvent = DynamoDBStreamEvent | ScheduledEvent;

export function isStreamEvent(event: unknown): event is DynamoDBStreamEvent {
  const records = (event as { Records?: unknown })?.Records;
  return Array.isArray(records);
}

/**
 * Whether a stream record can move a node's claimable count in a way the pool must react to:
 * - a lease entering or leaving CLAIMED (a pod's ADD or DEL);
 * - a node item becoming READY (its first pool pass right after the launch).
 * The pool-manager's own writes (FREE puts, RELEASING marks, deletes, node ENI records) are not triggers, so
 * a pass does not wake itself up again.
 */
export function isPoolTrigger(record: DynamoDBRecord): boolean {
  const keys = record.dynamodb?.Keys;
  const sk = keys?.[A.sk]?.S ?? '';
  const oldImage = record.dynamodb?.OldImage;
  const newImage = record.dynamodb?.NewImage;
  if (sk.startsWith(LEASE_SORT_PREFIX)) {
    const before = oldImage?.[A.state]?.S;
    const after = newImage?.[A.state]?.S;
    return before !== after && (before === 'CLAIMED' || after === 'CLAIMED');
  }
  if (sk === NODE_SORT_KEY) return newImage?.[A.phase]?.S === 'READY' && oldImage?.[A.phase]?.S !== 'READY';
  return false;
}

/** Distinct nodes of a stream batch, each with the sequence numbers of its trigger records (dedupe by node). */
export function nodesOfStream(event: DynamoDBStreamEvent): Map<string, string[]> {
  const nodes = new Map<string, string[]>();
  for (const record of event.Records) {
    if (!isPoolTrigger(record)) continue;
    const arn = record.dynamodb?.Keys?.[A.pk]?.S;
    if (!arn) continue;
    nodes.set(arn, [...(nodes.get(arn) ?? []), record.dynamodb?.SequenceNumber ?? '']);
  }
  return nodes;
}

/** The part of the Lambda context the sweep reads: how long this invocation may still run. */
export interface InvocationTime {
  getRemainingTimeInMillis(): number;
}

/**
 * What a sweep leaves of the invocation's time: one page of passes (each may wait on an attachment) must
 * still fit after the last page starts.
 */
export const SWEEP_DEADLINE_MARGIN_MS = 20_000;

export type PoolManagerHandler = (
  event: PoolManagerEvent,
  context?: InvocationTime,
) => Promise<DynamoDBBatchResponse | SweepReport>;

/**
 * The pool-manager's entry: a stream batch runs one pass per distinct node (several claims on one node in a
 * batch need one pass, not one each), nodes in parallel up to `concurrency`; a node whose pass throws reports
 * its records as failures (Lambda retries the batch from the earliest of them). A scheduled event sweeps
 * every READY node.
 */
export function createPoolManagerHandler(deps: PoolDeps, concurrency = 8): PoolManagerHandler {
  return async (event, context) => {
    try {
      if (!isStreamEvent(event)) {
        const remainingMs = context?.getRemainingTimeInMillis();
        const deadlineMs =
          remainingMs === undefined ? undefined : deps.clock.nowMs() + remainingMs - SWEEP_DEADLINE_MARGIN_MS;
        return await sweepPools(deps, { concurrency, ...(deadlineMs !== undefined ? { deadlineMs } : {}) });
      }
      const nodes = [...nodesOfStream(event)];
      const failures: string[] = [];
      let next = 0;
      const worker = async (): Promise<void> => {
        for (;;) {
          const entry = nodes[next++];
          if (!entry) return;
          const [arn, sequenceNumbers] = entry;
          try {
            await manageNodePool(deps, arn);
          } catch (err) {
            deps.logger.error('pool pass failed; the stream retries it', { instanceArn: arn, err });
            failures.push(...sequenceNumbers);
          }
        }
      };
      await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, nodes.length)) }, worker));
      return { batchItemFailures: failures.map((itemIdentifier) => ({ itemIdentifier })) };
    } finally {
      deps.metrics?.flush();
    }
  };
}
