import type { DynamoApi } from '../dynamo/api.js';
import { isConditionalCheckFailed } from '../dynamo/errors.js';
import { num } from '../lease-store/attribute-value.js';
import { TABLE_KEYS } from '../lease-store/table.js';
import { type BucketRate, intervalMs } from './gcra.js';
import type { RateBudgetStore, TakeResult } from './rate-budget-store.js';

/**
 * The partition of the budget items in the lease table. Not an instance ARN, so the node policy's
 * `dynamodb:LeadingKeys = ${ec2:SourceInstanceARN}` never reaches it; the Lambdas' table rights
 * (grantReadWriteData) do. Sort keys `ec2#<bucket>` are neither `node` nor `ip#…`, so the node listing, the
 * reconciler's lease Scan and the pool-manager's stream triggers all pass over them.
 */
export const BUDGET_PARTITION_PREFIX = 'ec2-budget#';
export const BUDGET_SORT_PREFIX = 'ec2#';
const TAT = 'tatMs';

/**
 * The budget's bucket times as items of the lease table, one per (Region, bucket): a take is one conditional
 * UpdateItem adding its tokens' time to a busy bucket, or setting it on an idle one; a GetItem only after
 * both conditions failed (a race with another taker, or no room before the caller's bound).
 */
export class DynamoRateBudgetStore implements RateBudgetStore {
  constructor(
    private readonly api: DynamoApi,
    private readonly tableName: string,
    /** Account and Region the buckets belong to (the table is in one account: the Region is enough). */
    private readonly scope: string,
  ) {}

  private key(bucket: string): Record<string, { S: string }> {
    return {
      [TABLE_KEYS.partitionKey]: { S: `${BUDGET_PARTITION_PREFIX}${this.scope}` },
      [TABLE_KEYS.sortKey]: { S: `${BUDGET_SORT_PREFIX}${bucket}` },
    };
  }

  async take(key: string, count: number, rate: BucketRate, nowMs: number, latestStartMs: number): Promise<TakeResult> {
    const step = intervalMs(rate);
    const cost = count * step;
    // The latest stored time at which the count-th token still starts by latestStartMs.
    const maxBaseMs = latestStartMs - (count - rate.bucket) * step;
    for (let attempt = 0; attempt < 4; attempt += 1) {
      try {
        const out = await this.api.updateItem({
          TableName: this.tableName,
          Key: this.key(key),
          UpdateExpression: 'SET #t = #t + :cost',
          ConditionExpression: '#t >= :now AND #t <= :maxBase',
          ExpressionAttributeNames: { '#t': TAT },
          ExpressionAttributeValues: { ':cost': num(cost), ':now': num(nowMs), ':maxBase': num(maxBaseMs) },
          ReturnValues: 'UPDATED_OLD',
        });
        return { kind: 'granted', baseMs: Number(out.Attributes?.[TAT]?.N ?? nowMs) };
      } catch (err) {
        if (!isConditionalCheckFailed(err)) throw err;
      }
      if (nowMs <= maxBaseMs)
        try {
          await this.api.updateItem({
            TableName: this.tableName,
            Key: this.key(key),
            UpdateExpression: 'SET #t = :tat',
            ConditionExpression: 'attribute_not_exists(#t) OR #t < :now',
            ExpressionAttributeNames: { '#t': TAT },
            ExpressionAttributeValues: { ':tat': num(nowMs + cost), ':now': num(nowMs) },
          });
          return { kind: 'granted', baseMs: nowMs };
        } catch (err) {
          if (!isConditionalCheckFailed(err)) throw err;
        }
      const seen = await this.api.getItem({ TableName: this.tableName, Key: this.key(key), ConsistentRead: true });
      const tatMs = Number(seen.Item?.[TAT]?.N ?? nowMs);
      if (Math.max(tatMs, nowMs) > maxBaseMs) return { kind: 'short', tatMs: Math.max(tatMs, nowMs) };
      // Neither condition held but there is room: another taker moved the time between our requests.
    }
    throw new Error(`EC2 rate budget ${key}: the stored time kept changing under four attempts`);
  }
}
