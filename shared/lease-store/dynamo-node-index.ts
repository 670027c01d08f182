import type { NodeRecord } from '../domain/node.js';
import type { DynamoApi } from '../dynamo/api.js';
import { ValidationError } from '../errors.js';
import { str } from './attribute-value.js';
import { guard } from './dynamo-lease-table.js';
import type { DynamoNodeItems } from './dynamo-node-items.js';
import { decodeEach, type IllFormedHandler } from './ill-formed.js';
import { A, decodeNodeRef, type Item, nodeKey } from './item-codec.js';
import type { NodeCursor, NodeRef, NodeRefPage } from './port.js';
import { NODE_INDEX, NODE_SORT_KEY, nodeIndexShards } from './table.js';

export interface DynamoNodeIndexOptions {
  readonly api: DynamoApi;
  readonly tableName: string;
  readonly nodes: DynamoNodeItems;
  /** Node items read at once by listNodes. */
  readonly readConcurrency: number;
  readonly onIllFormed: IllFormedHandler;
}

/** The walk over the sparse `nodes` index: shard by shard, resumable from a cursor. */
export class DynamoNodeIndex {
  constructor(private readonly o: DynamoNodeIndexOptions) {}

  async listNodes(): Promise<NodeRecord[]> {
    const arns: string[] = [];
    let from: NodeCursor | undefined = { shard: 0 };
    while (from) {
      const page: NodeRefPage = await this.listNodeRefs(from, 1000);
      arns.push(...page.refs.map((r) => r.instanceArn));
      from = page.next;
    }
    const nodes: NodeRecord[] = [];
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < arns.length) {
        const node = await this.getNodeOrSkip(arns[next++]!);
        if (node) nodes.push(node);
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.o.readConcurrency, arns.length) }, worker));
    return nodes.sort((a, b) => a.instanceArn.localeCompare(b.instanceArn));
  }

  async listNodeRefs(from: NodeCursor = { shard: 0 }, limit = 1000): Promise<NodeRefPage> {
    return guard('list', 'the node index', async () => {
      const refs: NodeRef[] = [];
      const shards = nodeIndexShards();
      let shard = from.shard;
      let after = from.afterArn;
      while (shard < shards.length && refs.length < limit) {
        const page = await this.o.api.query({
          TableName: this.o.tableName,
          IndexName: NODE_INDEX.name,
          KeyConditionExpression: `${A.nodeShard} = :shard`,
          ExpressionAttributeValues: { ':shard': str(shards[shard]!) },
          Limit: limit - refs.length,
          ...(after ? { ExclusiveStartKey: { ...nodeKey(after), [A.nodeShard]: str(shards[shard]!) } } : {}),
        });
        refs.push(...decodeEach((page.Items ?? []) as Item[], decodeNodeRef, this.o.onIllFormed));
        const last = page.LastEvaluatedKey?.[A.pk]?.S;
        if (last) {
          after = last;
        } else {
          shard += 1;
          after = undefined;
        }
      }
      if (shard >= shards.length) return { refs };
      return { refs, next: after ? { shard, afterArn: after } : { shard } };
    });
  }

  private async getNodeOrSkip(instanceArn: string): Promise<NodeRecord | undefined> {
    try {
      return await this.o.nodes.getNode(instanceArn);
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      this.o.onIllFormed({ pk: instanceArn, sk: NODE_SORT_KEY }, err);
      return undefined;
    }
  }
}
