import { DescribeTableCommand } from '@aws-sdk/client-dynamodb';
import { beforeEach, describe, expect, it } from 'vitest';
import { DynamoServiceError } from '../../shared/dynamo/errors.js';
import { LightDynamoClient } from '../../shared/dynamo/light-client.js';
import { SdkDynamoApi } from '../../shared/dynamo/sdk-client.js';
import { NoFreeLeaseError, StoreUnavailableError } from '../../shared/errors.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import { NODE_WRITABLE_ATTRS } from '../../shared/lease-store/item-codec.js';
import { CLAIMABLE_INDEX, NODE_INDEX } from '../../shared/lease-store/table.js';
import { CountingApi } from './counting-api.js';
import { useDynalite } from './dynalite-env.js';
import { holder, newInstanceArn, newLeases, nodeRecord } from './fixtures.js';

const env = useDynalite();
const NOW_MS = 1_767_225_600_000;

describe('Class: DynamoLeaseStore', () => {
  let api: CountingApi;
  let store: DynamoLeaseStore;
  let arn: string;
  let tableName: string;

  beforeEach(async () => {
    api = new CountingApi(new SdkDynamoApi(env.sdkClient()));
    tableName = await env.freshTable();
    store = new DynamoLeaseStore({ api, tableName, sleep: async () => {} });
    arn = newInstanceArn();
  });

  describe('request budget', () => {
    it('claims with one index Query and one UpdateItem when the caller skips the holder lookup', async () => {
      await store.putLeases(newLeases(arn, 20), NOW_MS);
      api.reset();
      await store.claim(arn, holder(1), NOW_MS, { checkExisting: false });
      expect(api.calls).toEqual(['Query:claimable', 'UpdateItem']);
    });

    it('looks the holder up with one consistent Query of the partition first by default', async () => {
      await store.putLeases(newLeases(arn, 20), NOW_MS);
      api.reset();
      await store.claim(arn, holder(1), NOW_MS);
      expect(api.calls).toEqual(['Query', 'Query:claimable', 'UpdateItem']);
    });

    it('reads the claimable index strongly consistently (a local index allows it, and dynalite answers it)', async () => {
      await store.putLeases(newLeases(arn, 2), NOW_MS);
      const consistent: (boolean | undefined)[] = [];
      api.overrides.query = async (input, real) => {
        if (input.IndexName === CLAIMABLE_INDEX.name) consistent.push(input.ConsistentRead);
        return real(input);
      };
      const first = await store.claim(arn, holder(1), NOW_MS, { checkExisting: false });
      const second = await store.claim(arn, holder(2), NOW_MS, { checkExisting: false });
      expect(second.ip).not.toBe(first.ip);
      expect(consistent).toEqual([true, true]);
    });

    it('releases a known address with one UpdateItem, and a repeated DEL costs the same', async () => {
      await store.putLeases(newLeases(arn, 2), NOW_MS);
      const lease = await store.claim(arn, holder(1), NOW_MS);
      api.reset();
      await store.release(arn, holder(1), NOW_MS, 1000, lease.ip);
      await store.release(arn, holder(1), NOW_MS, 1000, lease.ip);
      expect(api.calls).toEqual(['UpdateItem', 'UpdateItem']);
    });

    it("puts a launch's 16 leases as 16 conditional PutItems all in flight at once (one round trip)", async () => {
      let inFlight = 0;
      let most = 0;
      api.overrides.putItem = async (input, real) => {
        inFlight += 1;
        most = Math.max(most, inFlight);
        try {
          return await real(input);
        } finally {
          inFlight -= 1;
        }
      };
      await store.putLeases(newLeases(arn, 16), NOW_MS);
      expect(api.calls).toEqual(Array(16).fill('PutItem'));
      expect(most).toBe(16);
      expect(await store.listLeases(arn)).toHaveLength(16);
    });

    it('never scans on a node path', async () => {
      await store.putLeases(newLeases(arn, 5), NOW_MS);
      const lease = await store.claim(arn, holder(1), NOW_MS);
      await store.findByHolder(arn, 'container-1', 'eth0');
      await store.countClaimable(arn, NOW_MS);
      await store.release(arn, holder(1), NOW_MS, 0);
      await store.listLeases(arn);
      await store.getLease(arn, lease.ip);
      expect(api.count('Scan')).toBe(0);
    });
  });

  describe('pagination', () => {
    it('follows every page of a query: listing, counting, claiming past lost addresses and deleting a partition', async () => {
      await store.putLeases(newLeases(arn, 7), NOW_MS);
      const pages: string[] = [];
      // Two items a page, as DynamoDB cuts a large partition: every query must follow LastEvaluatedKey.
      api.overrides.query = (input, real) => {
        pages.push(input.IndexName ?? 'table');
        return real({ ...input, Limit: Math.min(input.Limit ?? 2, 2) });
      };
      expect(await store.listLeases(arn)).toHaveLength(7);
      expect(await store.countClaimable(arn, NOW_MS)).toBe(7);
      await store.claim(arn, holder(1), NOW_MS, { checkExisting: false });
      expect(await store.deleteNodePartition(arn)).toBe(7);
      expect(await store.listLeases(arn)).toEqual([]);
      expect(pages.filter((p) => p === 'table').length).toBeGreaterThanOrEqual(8);
      expect(pages.filter((p) => p === CLAIMABLE_INDEX.name).length).toBeGreaterThanOrEqual(4);
    });
  });

  describe('races and stale reads', () => {
    it('loses cleanly on a stale index entry and claims another lease', async () => {
      await store.putLeases(newLeases(arn, 3), NOW_MS);
      const taken = await store.claim(arn, holder(1), NOW_MS);
      // Another ADD claims it between our Query and our write: serve the taken lease, at its pre-claim version, first.
      api.overrides.query = async (input, real) => {
        const out = await real(input);
        if (!input.IndexName) return out;
        const stale = { sk: { S: `ip#${taken.ip}` }, v: { N: String(taken.version - 1) } };
        return { ...out, Items: [stale, ...(out.Items ?? [])] };
      };
      const deterministic = new DynamoLeaseStore({ api, tableName, random: () => 0 });
      api.reset();
      const lease = await deterministic.claim(arn, holder(2), NOW_MS, { checkExisting: false });
      expect(lease.ip).not.toBe(taken.ip);
      expect(api.calls).toEqual(['Query:claimable', 'UpdateItem', 'Query:claimable', 'UpdateItem']);
      expect((await store.getLease(arn, taken.ip))?.holder?.containerId).toBe('container-1');
    });

    it('succeeds when its UpdateItem lands twice (a client retry after a lost response)', async () => {
      await store.putLeases(newLeases(arn, 2), NOW_MS);
      api.overrides.updateItem = async (input, real) => {
        await real(input);
        return real(input);
      };
      const lease = await store.claim(arn, holder(1), NOW_MS, { checkExisting: false });
      expect(lease.holder?.containerId).toBe('container-1');
      const claimed = await store.listLeases(arn, { state: 'CLAIMED' });
      expect(claimed.map((l) => l.ip)).toEqual([lease.ip]);
    });

    it('reports NoFreeLeaseError when every index entry is one it already lost', async () => {
      await store.putLeases(newLeases(arn, 1), NOW_MS);
      const taken = await store.claim(arn, holder(1), NOW_MS);
      api.overrides.query = async (input, real) =>
        input.IndexName ? { Items: [{ sk: { S: `ip#${taken.ip}` }, v: { N: '1' } }], Count: 1 } : real(input);
      await expect(store.claim(arn, holder(2), NOW_MS, { checkExisting: false })).rejects.toBeInstanceOf(
        NoFreeLeaseError,
      );
    });
  });

  describe('failures', () => {
    it('turns throttling past the client retries into StoreUnavailableError, keeping the cause', async () => {
      const throttled = new DynamoServiceError('ProvisionedThroughputExceededException', 'slow down', 400);
      api.overrides.query = async () => {
        throw throttled;
      };
      const err = await store.claim(arn, holder(1), NOW_MS).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StoreUnavailableError);
      expect((err as Error).cause).toBe(throttled);
      expect((err as Error).message).toMatch(/^failed to claim a lease on arn:.*slow down$/);
    });

    it('turns a refused connection into StoreUnavailableError', async () => {
      api.overrides.updateItem = async () => {
        throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
      };
      await expect(store.release(arn, holder(1), NOW_MS, 0, '10.0.1.10')).rejects.toBeInstanceOf(StoreUnavailableError);
    });

    it('reports StoreUnavailableError when the light client cannot reach DynamoDB at all', async () => {
      const unreachable = new LightDynamoClient({
        endpoint: 'http://127.0.0.1:1',
        maxAttempts: 2,
        sleep: async () => {},
      });
      const offline = new DynamoLeaseStore({ api: unreachable, tableName });
      const err = await offline.claim(arn, holder(1), NOW_MS).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StoreUnavailableError);
      expect((err as Error).message).toMatch(/ECONNREFUSED/);
      await unreachable.close();
    });

    it('passes a non-transient DynamoDB error through unchanged', async () => {
      const missing = new DynamoServiceError('ResourceNotFoundException', 'no table', 400);
      api.overrides.getItem = async () => {
        throw missing;
      };
      await expect(store.getNode(arn)).rejects.toBe(missing);
    });

    it('retries unprocessed deletes until the partition is gone', async () => {
      await store.putLeases(newLeases(arn, 30), NOW_MS);
      let first = true;
      api.overrides.batchWriteItem = async (input, real) => {
        if (!first) return real(input);
        first = false;
        const [table, requests] = Object.entries(input.RequestItems ?? {})[0]!;
        const done = requests.slice(0, 10);
        await real({ RequestItems: { [table]: done } });
        return { UnprocessedItems: { [table]: requests.slice(10) } };
      };
      expect(await store.deleteNodePartition(arn)).toBe(30);
      expect(await store.listLeases(arn)).toEqual([]);
      expect(api.count('BatchWriteItem')).toBe(3);
    });

    it('gives up with StoreUnavailableError when deletes stay unprocessed', async () => {
      await store.putLeases(newLeases(arn, 3), NOW_MS);
      api.overrides.batchWriteItem = async (input) => ({ UnprocessedItems: input.RequestItems });
      await expect(store.deleteNodePartition(arn)).rejects.toBeInstanceOf(StoreUnavailableError);
      expect(await store.listLeases(arn)).toHaveLength(3);
    });
  });

  describe('partition confinement (issue 14: claim-index poisoning)', () => {
    it('declares the claimable index as local to the partition, and no global index on a node-writable key', async () => {
      const { Table } = await env.sdkClient().send(new DescribeTableCommand({ TableName: tableName }));
      // The one global index is the node index, keyed on an attribute no node may write (issue 25).
      expect(Table?.GlobalSecondaryIndexes?.map((i) => [i.IndexName, i.KeySchema?.[0]?.AttributeName])).toEqual([
        [NODE_INDEX.name, NODE_INDEX.partitionKey],
      ]);
      expect(NODE_WRITABLE_ATTRS).not.toContain(NODE_INDEX.partitionKey);
      expect(Table?.LocalSecondaryIndexes?.map((i) => [i.IndexName, i.KeySchema, i.Projection])).toEqual([
        [
          CLAIMABLE_INDEX.name,
          [
            { AttributeName: 'pk', KeyType: 'HASH' },
            { AttributeName: 'cAt', KeyType: 'RANGE' },
          ],
          { ProjectionType: 'ALL' },
        ],
      ]);
    });

    it('never shows a victim the claimable items another node writes into its own partition', async () => {
      const victim = arn;
      const attacker = newInstanceArn();
      await store.putLeases(newLeases(victim, 2), NOW_MS);
      // The reproduced attack: 150 claimable-looking items, reusable since the epoch, naming the victim in the
      // old index key (cPk) and in every other attribute a node could write.
      for (let i = 0; i < 150; i++) {
        await api.updateItem({
          TableName: tableName,
          Key: { pk: { S: attacker }, sk: { S: `ip#10.9.${Math.floor(i / 200)}.${i % 200}` } },
          UpdateExpression: 'SET st = :free, v = :one, cAt = :zero, cPk = :victim',
          ExpressionAttributeValues: {
            ':free': { S: 'FREE' },
            ':one': { N: '1' },
            ':zero': { N: '0' },
            ':victim': { S: victim },
          },
        });
      }
      const page = await api.query({
        TableName: tableName,
        IndexName: CLAIMABLE_INDEX.name,
        KeyConditionExpression: 'pk = :arn AND cAt <= :now',
        ExpressionAttributeValues: { ':arn': { S: victim }, ':now': { N: String(NOW_MS) } },
      });
      expect(page.Items?.map((item) => item['pk']?.S)).toEqual([victim, victim]);
      expect(await store.countClaimable(victim, NOW_MS)).toBe(2);
      // Negative control: the attacker's items are in the index — under the attacker's own partition.
      expect(await store.countClaimable(attacker, NOW_MS)).toBe(150);
      api.reset();
      const lease = await store.claim(victim, holder(1), NOW_MS, { checkExisting: false });
      expect(lease.instanceArn).toBe(victim);
      expect(api.calls).toEqual(['Query:claimable', 'UpdateItem']);
    });

    it('neither claims nor counts a node item that carries the index key', async () => {
      await store.createNode(nodeRecord(arn));
      await api.updateItem({
        TableName: tableName,
        Key: { pk: { S: arn }, sk: { S: 'node' } },
        UpdateExpression: 'SET cAt = :zero, st = :free, v = :one',
        ExpressionAttributeValues: { ':zero': { N: '0' }, ':free': { S: 'FREE' }, ':one': { N: '1' } },
      });
      expect(await store.countClaimable(arn, NOW_MS)).toBe(0);
      await expect(store.claim(arn, holder(1), NOW_MS, { checkExisting: false })).rejects.toBeInstanceOf(
        NoFreeLeaseError,
      );
      expect((await store.getNode(arn))?.version).toBe(nodeRecord(arn).version);
    });
  });

  it('runs 64 concurrent claims on 40 leases within a bounded number of requests', async () => {
    await store.putLeases(newLeases(arn, 40), NOW_MS);
    api.reset();
    const results = await Promise.allSettled(
      Array.from({ length: 64 }, (_, i) => store.claim(arn, holder(i), NOW_MS, { checkExisting: false })),
    );
    const updates = api.count('UpdateItem');
    const queries = api.count('Query:claimable');
    process.stdout.write(`64 claimers / 40 leases: ${queries} index queries, ${updates} updates\n`);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(40);
    // Every claimer queries at least once; every lost race (≤ 8 each) costs one more query and update.
    expect(updates).toBeGreaterThanOrEqual(40);
    expect(queries).toBeLessThanOrEqual(64 * 9);
  });
});
