import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from '../../cli/cli.js';
import { instanceArn } from '../../shared/domain/arn.js';
import type { NodeRecord } from '../../shared/domain/node.js';
import { SdkDynamoApi } from '../../shared/dynamo/sdk-client.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import { ensureTable } from '../../shared/lease-store/ensure-table.js';
import { backfillNodeIndex } from '../../shared/schedule/node-index-backfill.js';
import { startDynalite } from '../support/dynalite.js';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

function node(i: number): NodeRecord {
  const instanceId = `i-${(0x5000 + i).toString(16).padStart(17, '0')}`;
  return {
    instanceArn: instanceArn('us-east-1', '123456789012', instanceId, 'aws'),
    instanceId,
    instanceType: 'm5.large',
    availabilityZone: 'us-east-1a',
    podSubnetIds: ['subnet-0aaaaaaaaaaaaaaaa'],
    phase: 'READY',
    enis: [],
    maxPods: 29,
    createdAtMs: 1_000,
    updatedAtMs: 2_000,
    version: 4,
  };
}

describe('migrate node-index: the backfill of the node index key', () => {
  it('makes node items written before the index visible to the schedule, changes nothing else, and re-runs as a no-op', async () => {
    const dynalite = await startDynalite();
    const client = new DynamoDBClient({
      endpoint: dynalite.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'AKIDLOCAL', secretAccessKey: 'local-secret' },
    });
    closers.push(async () => {
      client.destroy();
      await dynalite.close();
    });
    const tableName = 'backfill';
    await ensureTable(client, tableName, { pollMs: 10 });
    const api = new SdkDynamoApi(client);
    const store = new DynamoLeaseStore({ api, tableName });
    const nodes = Array.from({ length: 5 }, (_, i) => node(i));
    for (const n of nodes) await store.createNode(n);
    // Three were written before the index: the codec of then wrote no `nsh`.
    const old = nodes.slice(0, 3);
    for (const n of old)
      await api.updateItem({
        TableName: tableName,
        Key: { pk: { S: n.instanceArn }, sk: { S: 'node' } },
        UpdateExpression: 'REMOVE nsh',
      });
    const items = async () =>
      new Map(
        await Promise.all(
          nodes.map(async (n) => {
            const out = await api.getItem({
              TableName: tableName,
              Key: { pk: { S: n.instanceArn }, sk: { S: 'node' } },
              ConsistentRead: true,
            });
            const { nsh: _, ...rest } = out.Item ?? {};
            return [n.instanceArn, rest] as const;
          }),
        ),
      );
    const visible = async () => (await store.listNodeRefs({ shard: 0 }, 100)).refs.map((r) => r.instanceArn).sort();
    expect(await visible()).toEqual(
      nodes
        .slice(3)
        .map((n) => n.instanceArn)
        .sort(),
    );
    const before = await items();

    expect(await backfillNodeIndex(api, tableName)).toMatchObject({ updated: 3, alreadyIndexed: 0 });
    expect(await visible()).toEqual(nodes.map((n) => n.instanceArn).sort());
    expect(await items()).toEqual(before); // only `nsh` was added: version, times, phase untouched
    expect((await store.getNode(old[0]!.instanceArn))?.version).toBe(4);

    // Re-running finds nothing to do.
    expect(await backfillNodeIndex(api, tableName)).toMatchObject({ updated: 0, alreadyIndexed: 0 });
    expect(await items()).toEqual(before);
  });

  it('refuses an unknown migration with a usage error', async () => {
    let err = '';
    const code = await runCli(['migrate', 'node-indx'], { out: () => {}, err: (t) => (err += t), env: {} });
    expect(code).toBe(2);
    expect(err).toContain('unknown migration "node-indx"');
  });
});
