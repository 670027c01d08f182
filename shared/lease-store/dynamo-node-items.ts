import type { NodeRecord } from '../domain/node.js';
import type { DynamoApi } from '../dynamo/api.js';
import { isConditionalCheckFailed } from '../dynamo/errors.js';
import { NodeNotFoundError, VersionConflictError } from '../errors.js';
import { num } from './attribute-value.js';
import { guard } from './dynamo-lease-table.js';
import { A, decodeNode, encodeNode, type Item, nodeKey } from './item-codec.js';

/** The node item of each partition: one versioned item the control plane writes whole. */
export class DynamoNodeItems {
  constructor(
    private readonly api: DynamoApi,
    private readonly table: string,
  ) {}

  async getNode(instanceArn: string, read: { eventual?: boolean } = {}): Promise<NodeRecord | undefined> {
    return guard('read the node item of', instanceArn, async () => {
      const out = await this.api.getItem({
        TableName: this.table,
        Key: nodeKey(instanceArn),
        ConsistentRead: read.eventual !== true,
      });
      return out.Item ? decodeNode(out.Item as Item) : undefined;
    });
  }

  async createNode(node: NodeRecord): Promise<boolean> {
    return guard('create the node item of', node.instanceArn, async () => {
      try {
        await this.api.putItem({
          TableName: this.table,
          Item: encodeNode(node, node.version),
          ConditionExpression: `attribute_not_exists(${A.sk})`,
        });
        return true;
      } catch (err) {
        if (isConditionalCheckFailed(err)) return false;
        throw err;
      }
    });
  }

  async updateNode(next: NodeRecord, expectedVersion: number): Promise<NodeRecord> {
    return guard('update the node item of', next.instanceArn, async () => {
      const written = { ...next, version: expectedVersion + 1 };
      try {
        await this.api.putItem({
          TableName: this.table,
          Item: encodeNode(written, written.version),
          ConditionExpression: `${A.nodeVersion} = :expected`,
          ExpressionAttributeValues: { ':expected': num(expectedVersion) },
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        });
        return written;
      } catch (err) {
        if (!isConditionalCheckFailed(err)) throw err;
        // Off the hot path: one read tells a missing node from a moved-on one.
        const current =
          (err as { Item?: Item }).Item ??
          (await this.api.getItem({ TableName: this.table, Key: nodeKey(next.instanceArn), ConsistentRead: true }))
            .Item;
        if (!current) throw new NodeNotFoundError(next.instanceArn);
        throw new VersionConflictError(next.instanceArn, expectedVersion);
      }
    });
  }
}
