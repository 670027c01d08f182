import type { Lease } from '../domain/lease.js';
import type { NodeRecord } from '../domain/node.js';
import type { DynamoApi } from '../dynamo/api.js';
import { isConditionalCheckFailed } from '../dynamo/errors.js';
import { A, decodeLease, decodeNode, type Item } from '../lease-store/item-codec.js';
import { itemBytes } from '../lease-store/partition-bound.js';
import { LEASE_SORT_PREFIX, NODE_SORT_KEY, TABLE_KEYS } from '../lease-store/table.js';

/** Where a paged Scan stands: the table key of the last item read. */
export type ScanKey = Readonly<Record<string, string>>;

/** One partition's items as a page of the census Scan holds them (a partition may go on in the next page). */
export interface ScannedPartition {
  readonly instanceArn: string;
  /** Its lease items that decoded; `illFormedLeases` counts those that did not. */
  readonly leases: readonly Lease[];
  readonly illFormedLeases: number;
  /** The node item, when the page held one that decoded. */
  readonly node?: NodeRecord;
  /** The node item's phase when the page held it (`unknown` when it did not decode). */
  readonly nodePhase?: string;
  /** The key of the partition's last item on the page: where a Scan resumes after it. */
  readonly lastKey: ScanKey;
  /** The size of its items on the page (item-size rules): a node can grow its own partition without limit. */
  readonly bytes: number;
}

export interface ScanPage {
  /** In the Scan's order: a partition's items are contiguous, so only the last may go on in the next page. */
  readonly partitions: readonly ScannedPartition[];
  readonly next?: ScanKey;
}

/** Finds the partitions that hold lease items, whether or not a node item sits next to them. */
export interface LeasePartitions {
  /** Instance ARNs of every partition with at least one lease item. */
  listLeasePartitions(): Promise<string[]>;
  /** The first look of the two-look removal of partitions with no node item: instance ARN → marked at (ms). */
  strayMarks(): Promise<Map<string, number>>;
  markStray(instanceArn: string, atMs: number): Promise<void>;
  clearStrayMark(instanceArn: string): Promise<void>;
  /**
   * One page of the Scan, eventually consistent, whole items: the daily census reads the table a page at a
   * time, across runs, from where the last complete partition ended.
   */
  scanPage(from: ScanKey | undefined, limit: number): Promise<ScanPage>;
  /** Whether the partition still holds a lease item (a consistent Query of one item): the second look. */
  hasLeaseItems(instanceArn: string): Promise<boolean>;
}

/**
 * Marks live in the control plane's own partition, not in the stray one: a partition with no node item has
 * nowhere the control plane alone writes, and `dynamodb:LeadingKeys` keeps every node out of this key.
 */
export const RECONCILER_PARTITION = 'vpc-lease#reconciler';
const STRAY_MARK_PREFIX = 'stray#';
const MARKED_AT = 'markedAtMs';

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

  async scanPage(from: ScanKey | undefined, limit: number): Promise<ScanPage> {
    // No projection: DynamoDB bills a Scan by the size of the items it reads, whatever it returns, so the census
    // takes whole items and gives them to the first looks of the stray search, the drift check and the pool.
    const page = await this.api.scan({
      TableName: this.tableName,
      Limit: limit,
      ...(from ? { ExclusiveStartKey: Object.fromEntries(Object.entries(from).map(([k, v]) => [k, { S: v }])) } : {}),
    });
    const seen = new Map<
      string,
      { leases: Lease[]; illFormedLeases: number; bytes: number; node?: NodeRecord; nodePhase?: string }
    >();
    const lastKeys = new Map<string, ScanKey>();
    for (const item of (page.Items ?? []) as Item[]) {
      const pk = item[TABLE_KEYS.partitionKey]?.S;
      const sk = item[TABLE_KEYS.sortKey]?.S ?? '';
      if (!pk) continue;
      const entry = seen.get(pk) ?? { leases: [], illFormedLeases: 0, bytes: 0 };
      seen.set(pk, entry);
      entry.bytes += itemBytes(item);
      lastKeys.set(pk, { [TABLE_KEYS.partitionKey]: pk, [TABLE_KEYS.sortKey]: sk });
      if (sk === NODE_SORT_KEY) {
        entry.nodePhase = item[A.phase]?.S ?? 'unknown';
        try {
          entry.node = decodeNode(item);
        } catch {
          entry.nodePhase = 'unknown';
        }
      } else if (sk.startsWith(LEASE_SORT_PREFIX)) {
        try {
          entry.leases.push(decodeLease(item));
        } catch {
          entry.illFormedLeases += 1;
        }
      }
    }
    const last = page.LastEvaluatedKey;
    const next = last
      ? Object.fromEntries(Object.entries(last).flatMap(([k, v]) => (v.S !== undefined ? [[k, v.S]] : [])))
      : undefined;
    return {
      partitions: [...seen].map(([instanceArn, e]) => ({ instanceArn, ...e, lastKey: lastKeys.get(instanceArn)! })),
      ...(next ? { next } : {}),
    };
  }

  async hasLeaseItems(instanceArn: string): Promise<boolean> {
    // No Limit: a Limit caps items read before the key condition's prefix is applied only within the range,
    // which begins_with already bounds, so the first page is at most one lease's worth with Limit 1.
    const page = await this.api.query({
      TableName: this.tableName,
      KeyConditionExpression: '#pk = :pk AND begins_with(#sk, :lease)',
      ExpressionAttributeNames: { '#pk': TABLE_KEYS.partitionKey, '#sk': TABLE_KEYS.sortKey },
      ExpressionAttributeValues: { ':pk': { S: instanceArn }, ':lease': { S: LEASE_SORT_PREFIX } },
      ProjectionExpression: '#pk',
      Limit: 1,
      ConsistentRead: true,
    });
    return (page.Items ?? []).length > 0;
  }

  async strayMarks(): Promise<Map<string, number>> {
    const marks = new Map<string, number>();
    let start: Record<string, unknown> | undefined;
    do {
      const page = await this.api.query({
        TableName: this.tableName,
        KeyConditionExpression: '#pk = :pk AND begins_with(#sk, :mark)',
        ExpressionAttributeNames: { '#pk': TABLE_KEYS.partitionKey, '#sk': TABLE_KEYS.sortKey },
        ExpressionAttributeValues: { ':pk': { S: RECONCILER_PARTITION }, ':mark': { S: STRAY_MARK_PREFIX } },
        ConsistentRead: true,
        ...(start ? { ExclusiveStartKey: start as never } : {}),
      });
      for (const item of page.Items ?? []) {
        const sk = item[TABLE_KEYS.sortKey]?.S ?? '';
        const atMs = Number(item[MARKED_AT]?.N);
        if (sk.startsWith(STRAY_MARK_PREFIX) && Number.isFinite(atMs))
          marks.set(sk.slice(STRAY_MARK_PREFIX.length), atMs);
      }
      start = page.LastEvaluatedKey;
    } while (start);
    return marks;
  }

  async markStray(instanceArn: string, atMs: number): Promise<void> {
    // Only if absent: a pass racing another must not move the first look's time forward.
    try {
      await this.api.putItem({
        TableName: this.tableName,
        Item: {
          [TABLE_KEYS.partitionKey]: { S: RECONCILER_PARTITION },
          [TABLE_KEYS.sortKey]: { S: `${STRAY_MARK_PREFIX}${instanceArn}` },
          [MARKED_AT]: { N: String(atMs) },
        },
        ConditionExpression: 'attribute_not_exists(#pk)',
        ExpressionAttributeNames: { '#pk': TABLE_KEYS.partitionKey },
      });
    } catch (err) {
      if (!isConditionalCheckFailed(err)) throw err;
    }
  }

  async clearStrayMark(instanceArn: string): Promise<void> {
    await this.api.deleteItem({
      TableName: this.tableName,
      Key: {
        [TABLE_KEYS.partitionKey]: { S: RECONCILER_PARTITION },
        [TABLE_KEYS.sortKey]: { S: `${STRAY_MARK_PREFIX}${instanceArn}` },
      },
    });
  }
}
