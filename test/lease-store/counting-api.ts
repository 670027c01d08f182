import type { DynamoApi } from '../../shared/dynamo/api.js';

export type Op = keyof DynamoApi;

/**
 * Wraps a DynamoApi to count requests per operation (and per index for queries) and to let a test rewrite
 * one operation's behaviour — the seam for faults the real server will not produce on demand.
 */
export class CountingApi implements DynamoApi {
  readonly calls: string[] = [];
  overrides: Partial<{
    [K in Op]: (input: Parameters<DynamoApi[K]>[0], real: DynamoApi[K]) => ReturnType<DynamoApi[K]>;
  }> = {};

  constructor(readonly inner: DynamoApi) {}

  count(label: string): number {
    return this.calls.filter((c) => c === label).length;
  }

  reset(): void {
    this.calls.length = 0;
  }

  private run<K extends Op>(op: K, input: Parameters<DynamoApi[K]>[0], label: string): ReturnType<DynamoApi[K]> {
    this.calls.push(label);
    const real = ((i: Parameters<DynamoApi[K]>[0]) =>
      (this.inner[op] as (x: typeof i) => ReturnType<DynamoApi[K]>)(i)) as unknown as DynamoApi[K];
    const override = this.overrides[op];
    if (override) return (override as (i: typeof input, r: DynamoApi[K]) => ReturnType<DynamoApi[K]>)(input, real);
    return (real as (i: typeof input) => ReturnType<DynamoApi[K]>)(input);
  }

  readonly getItem: DynamoApi['getItem'] = (input) => this.run('getItem', input, 'GetItem');
  readonly putItem: DynamoApi['putItem'] = (input) => this.run('putItem', input, 'PutItem');
  readonly updateItem: DynamoApi['updateItem'] = (input) => this.run('updateItem', input, 'UpdateItem');
  readonly deleteItem: DynamoApi['deleteItem'] = (input) => this.run('deleteItem', input, 'DeleteItem');
  readonly query: DynamoApi['query'] = (input) =>
    this.run('query', input, input.IndexName ? `Query:${input.IndexName}` : 'Query');
  readonly scan: DynamoApi['scan'] = (input) => this.run('scan', input, 'Scan');
  readonly batchWriteItem: DynamoApi['batchWriteItem'] = (input) => this.run('batchWriteItem', input, 'BatchWriteItem');
}
