import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { type Logger, silentLogger } from '../log.js';

/**
 * SQS batch processing with partial failures (what Powertools' `processPartialResponse` does): each record
 * runs through the record handler; one that throws becomes a `batchItemFailures` entry, so SQS redelivers only
 * it (the event source mapping must have `ReportBatchItemFailures` on — the CDK construct sets it).
 */
export type RecordHandler = (record: SQSRecord) => Promise<void>;

export interface BatchOptions {
  readonly logger?: Logger;
  /** Records handled at once; records of different instances are independent (default 10). */
  readonly concurrency?: number;
}

export async function processSqsBatch(
  event: SQSEvent,
  handle: RecordHandler,
  options: BatchOptions = {},
): Promise<SQSBatchResponse> {
  const logger = options.logger ?? silentLogger;
  const records = event.Records ?? [];
  const failed = new Set<string>();
  const concurrency = Math.max(1, options.concurrency ?? 10);
  let next = 0;
  const worker = async (): Promise<void> => {
    for (;;) {
      const record = records[next];
      next += 1;
      if (!record) return;
      try {
        await handle(record);
      } catch (err) {
        failed.add(record.messageId);
        logger.error('record failed; SQS will redeliver it', {
          messageId: record.messageId,
          receiveCount: record.attributes?.ApproximateReceiveCount,
          err,
        });
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, records.length) }, worker));
  // Keep the batch's order in the answer; Lambda does not require it, but logs and tests read better.
  return {
    batchItemFailures: records.filter((r) => failed.has(r.messageId)).map((r) => ({ itemIdentifier: r.messageId })),
  };
}
