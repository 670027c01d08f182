import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { createLifecycleBatchHandler, type SqsBatchHandler } from '../../shared/lifecycle/batch-handler.js';
import { lifecycleDepsFromEnv } from './deps.js';

// Built on the first invocation and kept for the container's life (clients, caches, concurrency cap).
let batchHandler: SqsBatchHandler | undefined;

export async function handler(event: SQSEvent): Promise<SQSBatchResponse> {
  batchHandler ??= createLifecycleBatchHandler(lifecycleDepsFromEnv());
  return batchHandler(event);
}
