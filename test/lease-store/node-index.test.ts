import { QueryCommand } from '@aws-sdk/client-dynamodb';
import { beforeEach, describe, expect, it } from 'vitest';
import { SdkDynamoApi } from '../../shared/dynamo/sdk-client.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import { A, leaseKey } from '../../shared/lease-store/item-codec.js';
import { NODE_INDEX, nodeIndexShards } from '../../shared/lease-store/table.js';
import { CountingApi } from './counting-api.js';
import { useDynalite } from './dynalite-env.js';
import { newInstanceArn, newLeases, nodeRecord } from './fixtures.js';

const env = useDynalite();

/** Every item of the node index, read raw (all shards). */
async function indexItems(tableName: string): Promise<Record<string, { S?: string }>[]> {
  const items: Record<string, { S?: string }>[] = [];
  for (const shard of nodeIndexShards()) {
    const out = await env.sdkClient().send(
      new QueryCommand({
        TableName: tableName,
        IndexName: NODE_INDEX.name,
        KeyConditionExpression: '#k = :v',
        ExpressionAttributeNames: { '#k': NODE_INDEX.partitionKey },
        ExpressionAttributeValues: { ':v': { S: shard } },
      }),
    );
    items.push(...((out.Items ?? []) as Record<string, { S?: string }>[]));
  }
  return items;
}

describe('Class: DynamoLeaseStore › node index (issue 25: sweeps without Scans)', () => {
  let api: CountingApi;
  let store: DynamoLeaseStore;
  let tableName: string;

  beforeEach(async () => {
    api = new CountingApi(new SdkDynamoApi(env.sdkClient()));
    tableName = await env.freshTable();
    store = new DynamoLeaseStore({ api, tableName });
  });

  it('holds node items only: leases, claimed or free, never enter it (the index is sparse on dynalite)', async () => {
    const arns = [newInstanceArn(), newInstanceArn(), newInstanceArn()];
    for (const arn of arns) {
      await store.createNode(nodeRecord(arn));
      await store.putLeases(newLeases(arn, 5), 1_000);
    }
    await store.claim(arns[0]!, { containerId: 'c1', ifName: 'eth0', netns: '/n' }, 2_000);
    const items = await indexItems(tableName);
    expect(items.map((i) => i[A.sk]?.S)).toEqual(['node', 'node', 'node']);
    expect(items.map((i) => i[A.pk]?.S).sort()).toEqual([...arns].sort());
    // Only the projected attributes come back, not the ENI list.
    expect(Object.keys(items[0]!).sort()).toEqual(
      [A.pk, A.sk, A.nodeShard, ...NODE_INDEX.projected].filter((k) => k !== A.goneSeenAt).sort(),
    );
  });

  it('lists nodes without a Scan: index Queries and one GetItem per node', async () => {
    const arns = [newInstanceArn(), newInstanceArn()];
    for (const arn of arns) {
      await store.createNode(nodeRecord(arn, { phase: 'READY' }));
      await store.putLeases(newLeases(arn, 30), 1_000);
    }
    api.reset();
    const nodes = await store.listNodes();
    expect(nodes.map((n) => n.instanceArn).sort()).toEqual([...arns].sort());
    expect(api.count('Scan')).toBe(0);
    expect(api.count('Query')).toBe(0); // no partition (lease) Query
    expect(api.count(`Query:${NODE_INDEX.name}`)).toBe(NODE_INDEX.shards);
    expect(api.count('GetItem')).toBe(2);
  });

  it('is refused a consistent read by dynalite, as by DynamoDB (GSIs are eventually consistent)', async () => {
    await expect(
      env.sdkClient().send(
        new QueryCommand({
          TableName: tableName,
          IndexName: NODE_INDEX.name,
          KeyConditionExpression: '#k = :v',
          ExpressionAttributeNames: { '#k': NODE_INDEX.partitionKey },
          ExpressionAttributeValues: { ':v': { S: 'nodes#0' } },
          ConsistentRead: true,
        }),
      ),
    ).rejects.toThrow(/Consistent reads are not supported on global secondary indexes/);
  });

  it('shows an item carrying the index key, whatever it is: the key being control-plane-only is the defence', async () => {
    // Negative control for the IAM rule (test/security, test/infra/node-policy): were a node allowed to write
    // `nsh`, its forged item would be listed to every schedule as a node.
    const arn = newInstanceArn();
    await store.putLeases(newLeases(arn, 1), 1_000);
    const ip = newLeases(arn, 1)[0]!.ip;
    await api.updateItem({
      TableName: tableName,
      Key: leaseKey(arn, ip),
      UpdateExpression: 'SET #k = :v',
      ExpressionAttributeNames: { '#k': A.nodeShard },
      ExpressionAttributeValues: { ':v': { S: 'nodes#0' } },
    });
    expect((await indexItems(tableName)).map((i) => i[A.sk]?.S)).toEqual([`ip#${ip}`]);
  });
});
