import type { DynamoApi } from '../dynamo/api.js';
import { isConditionalCheckFailed } from '../dynamo/errors.js';
import { num, str } from './attribute-value.js';
import { guard } from './dynamo-lease-table.js';
import { A, type Item } from './item-codec.js';
import { PASS_MARKER_SORT_KEY } from './table.js';

const passKey = (instanceArn: string): Item => ({ [A.pk]: str(instanceArn), [A.sk]: str(PASS_MARKER_SORT_KEY) });

/**
 * The assignment-pass marker: one conditional item per node so that the stream and the schedule never run an
 * Assign pass on the same node at once. It expires, so a crashed holder blocks the node for one TTL at most.
 */
export class DynamoPassMarker {
  constructor(
    private readonly api: DynamoApi,
    private readonly table: string,
  ) {}

  async acquire(instanceArn: string, owner: string, nowMs: number, ttlMs: number): Promise<boolean> {
    return guard('take the assignment-pass marker of', instanceArn, async () => {
      try {
        await this.api.putItem({
          TableName: this.table,
          Item: { ...passKey(instanceArn), [A.passOwner]: str(owner), [A.passUntil]: num(nowMs + ttlMs) },
          ConditionExpression: `attribute_not_exists(${A.passUntil}) OR ${A.passUntil} < :now OR ${A.passOwner} = :owner`,
          ExpressionAttributeValues: { ':now': num(nowMs), ':owner': str(owner) },
        });
        return true;
      } catch (err) {
        if (isConditionalCheckFailed(err)) return false;
        throw err;
      }
    });
  }

  async release(instanceArn: string, owner: string): Promise<void> {
    await guard('give back the assignment-pass marker of', instanceArn, async () => {
      try {
        await this.api.deleteItem({
          TableName: this.table,
          Key: passKey(instanceArn),
          ConditionExpression: `${A.passOwner} = :owner`,
          ExpressionAttributeValues: { ':owner': str(owner) },
        });
      } catch (err) {
        if (!isConditionalCheckFailed(err)) throw err;
      }
    });
  }
}
