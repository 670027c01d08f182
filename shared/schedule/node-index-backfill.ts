import type { DynamoApi } from '../dynamo/api.js';
import { isConditionalCheckFailed } from '../dynamo/errors.js';
import { A } from '../lease-store/item-codec.js';
import { NODE_SORT_KEY, nodeIndexShard, TABLE_KEYS } from '../lease-store/table.js';

export interface BackfillReport {
  /** Node items found without `nsh` and given one. */
  readonly updated: number;
  /** Node items that already had it (or gained it meanwhile from the control plane). */
  readonly alreadyIndexed: number;
  readonly scannedPages: number;
}

/**
 * Gives every node item written before the node index existed its index key (`nsh`), so the paced schedules
 * see it. One Scan of the table (node items without `nsh`, projected to the key), then per item an UpdateItem
 * that sets `nsh` only — the node's version and every other attribute stay as they are, and the condition
 * (a node item, still without `nsh`) makes a re-run, or a race with a control-plane write, a no-op.
 */
export async function backfillNodeIndex(api: DynamoApi, tableName: string): Promise<BackfillReport> {
  let updated = 0;
  let alreadyIndexed = 0;
  let scannedPages = 0;
  let start: Record<string, unknown> | undefined;
  const names = { '#pk': TABLE_KEYS.partitionKey, '#sk': TABLE_KEYS.sortKey, '#nsh': A.nodeShard };
  do {
    const page = await api.scan({
      TableName: tableName,
      FilterExpression: '#sk = :node AND attribute_not_exists(#nsh)',
      ProjectionExpression: '#pk',
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: { ':node': { S: NODE_SORT_KEY } },
      ...(start ? { ExclusiveStartKey: start as never } : {}),
    });
    scannedPages += 1;
    for (const item of page.Items ?? []) {
      const arn = item[TABLE_KEYS.partitionKey]?.S;
      if (!arn) continue;
      try {
        await api.updateItem({
          TableName: tableName,
          Key: { [TABLE_KEYS.partitionKey]: { S: arn }, [TABLE_KEYS.sortKey]: { S: NODE_SORT_KEY } },
          UpdateExpression: 'SET #nsh = :shard',
          ConditionExpression: 'attribute_exists(#pk) AND attribute_not_exists(#nsh)',
          ExpressionAttributeNames: { '#pk': TABLE_KEYS.partitionKey, '#nsh': A.nodeShard },
          ExpressionAttributeValues: { ':shard': { S: nodeIndexShard(arn) } },
        });
        updated += 1;
      } catch (err) {
        if (!isConditionalCheckFailed(err)) throw err;
        alreadyIndexed += 1;
      }
    }
    start = page.LastEvaluatedKey;
  } while (start);
  return { updated, alreadyIndexed, scannedPages };
}
