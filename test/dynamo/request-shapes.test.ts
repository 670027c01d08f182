import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DynamoApi } from '../../shared/dynamo/api.js';
import { LightDynamoClient } from '../../shared/dynamo/light-client.js';
import { SdkDynamoApi } from '../../shared/dynamo/sdk-client.js';

interface Sent {
  readonly target: string | undefined;
  readonly contentType: string | undefined;
  readonly body: unknown;
}

/** Records what each request carried and answers an empty success, which every output shape accepts. */
let server: Server;
let sent: Sent[];
let sdk: SdkDynamoApi;
let light: LightDynamoClient;

beforeAll(async () => {
  sent = [];
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      sent.push({
        target: req.headers['x-amz-target'] as string | undefined,
        contentType: req.headers['content-type'],
        body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown,
      });
      res.writeHead(200, { 'content-type': 'application/x-amz-json-1.0' });
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const credentials = { accessKeyId: 'AKID', secretAccessKey: 'secret', sessionToken: 'token' };
  sdk = new SdkDynamoApi(new DynamoDBClient({ endpoint, region: 'eu-west-1', credentials, maxAttempts: 1 }));
  light = new LightDynamoClient({
    endpoint,
    region: 'eu-west-1',
    credentials: async () => credentials,
    maxAttempts: 1,
  });
});

afterAll(async () => {
  sdk.client.destroy();
  await light.close();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const KEY = { pk: { S: 'arn:aws:ec2:eu-west-1:1:instance/i-1' }, sk: { S: 'ip#10.0.0.5' } };

/** Every DynamoApi call the Lambdas make, with the optional parts they use (conditions, pages, the index). */
const CALLS: readonly [string, (api: DynamoApi) => Promise<unknown>][] = [
  ['GetItem', (api) => api.getItem({ TableName: 't', Key: KEY, ConsistentRead: true })],
  [
    'PutItem',
    (api) =>
      api.putItem({
        TableName: 't',
        Item: { ...KEY, st: { S: 'FREE' }, v: { N: '1' }, tags: { SS: ['a', 'b'] }, on: { BOOL: true } },
        ConditionExpression: 'attribute_not_exists(pk)',
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
      }),
  ],
  [
    'UpdateItem',
    (api) =>
      api.updateItem({
        TableName: 't',
        Key: KEY,
        UpdateExpression: 'SET #st = :s, v = v + :one REMOVE claim',
        ConditionExpression: '#st = :free AND v = :v',
        ExpressionAttributeNames: { '#st': 'st' },
        ExpressionAttributeValues: {
          ':s': { S: 'LEASED' },
          ':one': { N: '1' },
          ':free': { S: 'FREE' },
          ':v': { N: '3' },
        },
        ReturnValues: 'ALL_NEW',
      }),
  ],
  ['DeleteItem', (api) => api.deleteItem({ TableName: 't', Key: KEY, ConditionExpression: 'attribute_exists(pk)' })],
  [
    'Query',
    (api) =>
      api.query({
        TableName: 't',
        IndexName: 'claimable',
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :ip)',
        FilterExpression: 'attribute_not_exists(claim)',
        ExpressionAttributeValues: { ':pk': KEY.pk, ':ip': { S: 'ip#' } },
        Limit: 25,
        ExclusiveStartKey: KEY,
        ScanIndexForward: false,
      }),
  ],
  [
    'Scan',
    (api) => api.scan({ TableName: 't', Segment: 2, TotalSegments: 8, Limit: 100, ProjectionExpression: 'pk, sk, st' }),
  ],
  [
    'BatchWriteItem',
    (api) =>
      api.batchWriteItem({
        RequestItems: { t: [{ PutRequest: { Item: { ...KEY, st: { S: 'FREE' } } } }, { DeleteRequest: { Key: KEY } }] },
      }),
  ],
];

describe('LightDynamoClient against the AWS SDK: the same request for every call the Lambdas make', () => {
  it.each(CALLS)('%s: the same target, content type and JSON body as the SDK sends', async (action, call) => {
    sent.length = 0;
    await call(sdk);
    await call(light);

    expect(sent).toHaveLength(2);
    const [bySdk, byLight] = sent as [Sent, Sent];
    expect(bySdk.target).toBe(`DynamoDB_20120810.${action}`);
    expect(byLight).toEqual(bySdk);
  });
});
