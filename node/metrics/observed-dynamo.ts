import type { DynamoApi } from '../../shared/dynamo/api.js';

/** What one DynamoDB request did: its operation, how long it took (retries included), and its error if any. */
export type DynamoRequestObserver = (operation: string, durationS: number, err?: unknown) => void;

const OPERATIONS = {
  getItem: 'GetItem',
  putItem: 'PutItem',
  updateItem: 'UpdateItem',
  deleteItem: 'DeleteItem',
  query: 'Query',
  scan: 'Scan',
  batchWriteItem: 'BatchWriteItem',
} as const satisfies Record<keyof DynamoApi, string>;

/**
 * The node's DynamoDB client with every request timed: wraps the client rather than the LeaseStore, so a claim's
 * Query and UpdateItem are two observations, as the store bills and throttles them.
 */
export function observeDynamo(api: DynamoApi, observe: DynamoRequestObserver): DynamoApi {
  const timed = <I, O>(operation: string, call: (input: I) => Promise<O>) => {
    return async (input: I): Promise<O> => {
      const startNs = process.hrtime.bigint();
      const elapsedS = () => Number(process.hrtime.bigint() - startNs) / 1e9;
      try {
        const out = await call(input);
        observe(operation, elapsedS());
        return out;
      } catch (err) {
        observe(operation, elapsedS(), err);
        throw err;
      }
    };
  };
  return {
    getItem: timed(OPERATIONS.getItem, (i) => api.getItem(i)),
    putItem: timed(OPERATIONS.putItem, (i) => api.putItem(i)),
    updateItem: timed(OPERATIONS.updateItem, (i) => api.updateItem(i)),
    deleteItem: timed(OPERATIONS.deleteItem, (i) => api.deleteItem(i)),
    query: timed(OPERATIONS.query, (i) => api.query(i)),
    scan: timed(OPERATIONS.scan, (i) => api.scan(i)),
    batchWriteItem: timed(OPERATIONS.batchWriteItem, (i) => api.batchWriteItem(i)),
  };
}
