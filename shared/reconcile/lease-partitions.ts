import type { DynamoApi } from '../dynamo/api.js';
import { LEASE_SORT_PREFIX, TABLE_KEYS } from '../lease-store/table.js';

/** Finds the partitions that hold lease items, whether or not a node item sits next to them. */
export interface LeasePartitions {
  /** Instance ARNs of every partition with at least one lease item. */
  listLeasePartitions(): Promise<string[]>;
}

/**
 * A Scan of the lease table, filtered to lease items and projected to the partition key. The lease store's
 * port reaches partitions only through their node item, so a partition whose node item is gone (a crash
 * between a partition delete and a late lease put; an operator's delete) is invisible to it — only a Scan
 * finds one. That is acceptable here and only here: the reconciler runs on a schedule (every few minutes),
 * off every hot path; ADD and the pool never scan. The filter is applied after the read (a Scan reads, and
 * is billed for, the whole table), hence the projection to keep the pages small.
 */
export class DynamoLeasePartitions implements LeasePartitions {
  constructor(
    private readonly api: DynamoApi,
    private readonly tableName: string,
  ) {}

  async listLeasePartitions(): Promise<string[]> {
    const partitions = new Set<string>();
    let start: Record<string, unknown> | undefined;
    do {
      const page = await this.api.scan({
        TableName: this.tableName,
        FilterExpression: 'begins_with(#sk, :lease)',
        ProjectionExpression: '#pk',
        ExpressionAttributeNames: { '#pk': TABLE_KEYS.partitionKey, '#sk': TABLE_KEYS.sortKey },
        ExpressionAttributeValues: { ':lease': { S: LEASE_SORT_PREFIX } },
        ...(start ? { ExclusiveStartKey: start as never } : {}),
      });
      for (const item of page.Items ?? []) {
        const pk = item[TABLE_KEYS.partitionKey]?.S;
        if (pk) partitions.add(pk);
      }
      start = page.LastEvaluatedKey;
    } while (start);
    return [...partitions];
  }
}
