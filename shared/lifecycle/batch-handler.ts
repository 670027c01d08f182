import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { processSqsBatch } from '../queue/batch.js';
import type { LifecycleDeps } from './deps.js';
import { createLifecycleRecordHandler } from './record-handler.js';

export type SqsBatchHandler = (event: SQSEvent) => Promise<SQSBatchResponse>;

/** The whole Lambda behind one line: each SQS record through the record handler, then metrics flushed. */
export function createLifecycleBatchHandler(deps: LifecycleDeps): SqsBatchHandler {
  const handleBody = createLifecycleRecordHandler(deps);
  return async (event) => {
    try {
      return await processSqsBatch(event, (record) => handleBody(record.body), { logger: deps.logger });
    } finally {
      deps.metrics?.flush();
    }
  };
}
