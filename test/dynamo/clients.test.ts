import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DynamoApi } from '../../shared/dynamo/api.js';
import { LightDynamoClient } from '../../shared/dynamo/light-client.js';
import { SdkDynamoApi } from '../../shared/dynamo/sdk-client.js';
import { useDynalite } from '../lease-store/dynalite-env.js';

const env = useDynalite();
let table: string;
let light: LightDynamoClient;
let sdk: SdkDynamoApi;

beforeAll(async () => {
  table = await env.freshTable();
  light = new LightDynamoClient({ timeoutMs: 30_000 });
  sdk = new SdkDynamoApi(env.sdkClient());
});

afterAll(async () => {
  await light.close();
});

/** Both adapters of DynamoApi against the same real DynamoDB API server must be indistinguishable. */
describe.each([
  ['AWS SDK client', () => sdk as DynamoApi],
  ['light client', () => light as DynamoApi],
])('DynamoApi over the %s on dynalite', (label, api) => {
  const pk = { S: `arn:${label}` };

  it('writes, reads, queries and deletes items', async () => {
    await api().putItem({ TableName: table, Item: { pk, sk: { S: 'ip#1' }, v: { N: '1' }, st: { S: 'FREE' } } });
    await api().putItem({ TableName: table, Item: { pk, sk: { S: 'ip#2' }, v: { N: '1' }, st: { S: 'FREE' } } });
    const got = await api().getItem({ TableName: table, Key: { pk, sk: { S: 'ip#1' } }, ConsistentRead: true });
    expect(got.Item).toEqual({ pk, sk: { S: 'ip#1' }, v: { N: '1' }, st: { S: 'FREE' } });
    const updated = await api().updateItem({
      TableName: table,
      Key: { pk, sk: { S: 'ip#1' } },
      UpdateExpression: 'SET v = v + :one',
      ExpressionAttributeValues: { ':one': { N: '1' } },
      ReturnValues: 'ALL_NEW',
    });
    expect(updated.Attributes?.['v']).toEqual({ N: '2' });
    const page = await api().query({
      TableName: table,
      KeyConditionExpression: 'pk = :pk',
      ExpressionAttributeValues: { ':pk': pk },
      Limit: 1,
    });
    expect(page.Items).toHaveLength(1);
    expect(page.LastEvaluatedKey).toBeDefined();
    const scan = await api().scan({
      TableName: table,
      FilterExpression: 'pk = :pk',
      ExpressionAttributeValues: { ':pk': pk },
    });
    expect(scan.Items).toHaveLength(2);
    const batch = await api().batchWriteItem({
      RequestItems: { [table]: [{ DeleteRequest: { Key: { pk, sk: { S: 'ip#2' } } } }] },
    });
    expect(Object.keys(batch.UnprocessedItems ?? {})).toEqual([]);
    await api().deleteItem({ TableName: table, Key: { pk, sk: { S: 'ip#1' } } });
    const after = await api().query({
      TableName: table,
      KeyConditionExpression: 'pk = :pk',
      ExpressionAttributeValues: { ':pk': pk },
      ConsistentRead: true,
    });
    expect(after.Count).toBe(0);
  });

  it('names a failed condition ConditionalCheckFailedException', async () => {
    const err = (await api()
      .putItem({
        TableName: table,
        Item: { pk, sk: { S: 'node' } },
        ConditionExpression: 'attribute_exists(sk)',
      })
      .catch((e: unknown) => e)) as Error;
    expect(err).toBeInstanceOf(Error);
    expect(err.name).toBe('ConditionalCheckFailedException');
  });

  it('names a missing table ResourceNotFoundException and a bad expression ValidationException', async () => {
    const missing = (await api()
      .getItem({ TableName: 'no-such-table', Key: { pk, sk: { S: 'x' } } })
      .catch((e: unknown) => e)) as Error;
    expect(missing.name).toBe('ResourceNotFoundException');
    const invalid = (await api()
      .query({ TableName: table, KeyConditionExpression: 'pk = = :pk', ExpressionAttributeValues: { ':pk': pk } })
      .catch((e: unknown) => e)) as Error;
    expect(invalid.name).toBe('ValidationException');
    expect(invalid.message).toMatch(/KeyConditionExpression/);
  });
});
