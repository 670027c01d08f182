import {
  DynamoDBClient,
  ExecuteStatementCommand,
  GetItemCommand,
  QueryCommand,
  ScanCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalCloud, startLocalCloud } from '../../local-cloud/cloud.js';
import type { InstanceSession } from '../../local-cloud/iam/endpoint.js';
import {
  ExpressionError,
  partitionKeyPlaceholder,
  projectedAttributes,
  updatedAttributes,
} from '../../local-cloud/iam/expressions.js';
import { signRequest } from '../../shared/dynamo/sigv4.js';
import { A, leaseKey, nodeKey } from '../../shared/lease-store/item-codec.js';
import { CLAIMABLE_INDEX } from '../../shared/lease-store/table.js';

const TABLE = 'vpc-lease';

describe('Function: expression readers', () => {
  it('names every top-level attribute an update writes, through #names and nested paths', () => {
    expect(
      updatedAttributes('SET #a = :a, b.c[2] = if_not_exists(b, :b) REMOVE d, #e ADD f :f DELETE g :g', {
        '#a': 'alpha',
        '#e': 'echo',
      }).sort(),
    ).toEqual(['alpha', 'b', 'd', 'echo', 'f', 'g']);
    expect(updatedAttributes('set x = list_append(x, :v)', undefined)).toEqual(['x']);
  });

  it('refuses what it cannot read rather than guess (negative control)', () => {
    expect(() => updatedAttributes('SET #missing = :v', {})).toThrow(ExpressionError);
    expect(() => updatedAttributes('x = :v', undefined)).toThrow(ExpressionError);
    expect(() => updatedAttributes('SET 9x = :v', undefined)).toThrow(ExpressionError);
  });

  it('finds the partition key value of a key condition, either way round, and not a sort-key bound', () => {
    expect(partitionKeyPlaceholder('#p = :p AND #s BETWEEN :a AND :b', { '#p': 'pk', '#s': 'sk' }, 'pk')).toBe(':p');
    expect(partitionKeyPlaceholder(':v = pk AND begins_with(sk, :s)', undefined, 'pk')).toBe(':v');
    expect(partitionKeyPlaceholder('begins_with(sk, :s)', undefined, 'pk')).toBeUndefined();
    expect(partitionKeyPlaceholder('sk = :s', undefined, 'pk')).toBeUndefined();
  });

  it('reads a projection', () => {
    expect(projectedAttributes('pk, #s, a.b[1]', { '#s': 'st' })).toEqual(['pk', 'st', 'a']);
  });
});

describe('Class: IamEndpoint (the local cloud DynamoDB endpoint)', () => {
  let cloud: LocalCloud;
  let a: InstanceSession;
  let b: InstanceSession;
  const clients: DynamoDBClient[] = [];
  const client = (credentials: { accessKeyId: string; secretAccessKey: string; sessionToken?: string }) => {
    const c = new DynamoDBClient({
      region: cloud.region,
      endpoint: cloud.endpoints.dynamodb,
      credentials,
      maxAttempts: 1,
    });
    clients.push(c);
    return c;
  };
  const errorName = async (p: Promise<unknown>): Promise<string> =>
    p.then(
      () => 'allowed',
      (err: Error) => err.name,
    );

  beforeAll(async () => {
    cloud = await startLocalCloud({ leaseTable: TABLE, seedNetwork: true, iam: { controlPlaneKeys: ['local'] } });
    const subnetId = cloud.network!.subnetIds[0]!;
    a = cloud.nodeSession(cloud.ec2.api.launchInstance({ instanceType: 'm5.large', subnetId }).instanceId);
    b = cloud.nodeSession(cloud.ec2.api.launchInstance({ instanceType: 'm5.large', subnetId }).instanceId);
  });
  afterAll(async () => {
    for (const c of clients) c.destroy();
    await cloud?.close();
  });

  it('issues each instance its own session, stable across calls', () => {
    expect(a.credentials.accessKeyId).not.toBe(b.credentials.accessKeyId);
    expect(cloud.nodeSession(a.instanceId)).toBe(a);
    expect(a.instanceArn).toMatch(/^arn:aws:ec2:us-east-1:123456789012:instance\/i-/);
  });

  it('binds ec2:SourceInstanceARN to the credentials: own partition allowed, the other denied', async () => {
    const own = client(a.credentials);
    const get = (arn: string) => own.send(new GetItemCommand({ TableName: TABLE, Key: nodeKey(arn) }));
    expect(await errorName(get(a.instanceArn))).toBe('allowed');
    expect(await errorName(get(b.instanceArn))).toBe('AccessDeniedException');
    expect(cloud.iam.denials.at(-1)).toMatchObject({
      principal: a.instanceId,
      action: 'dynamodb:GetItem',
      allowed: false,
    });
  });

  it('answers a denial with DynamoDB’s own AccessDeniedException message', async () => {
    const err = await client(a.credentials)
      .send(new ScanCommand({ TableName: TABLE }))
      .catch((e: Error & { $metadata?: { httpStatusCode?: number } }) => e);
    expect((err as Error).message).toBe(
      `User: arn:aws:sts::123456789012:assumed-role/vpc-lease-node/${a.instanceId} is not authorized to perform: dynamodb:Scan on resource: arn:aws:dynamodb:us-east-1:123456789012:table/${TABLE} because no identity-based policy allows the dynamodb:Scan action`,
    );
    expect((err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode).toBe(400);
  });

  it('refuses as AccessDenied an operation IAM cannot evaluate (PartiQL), never with a server error', async () => {
    const deniedBefore = cloud.iam.counts.denied;
    const statement = `UPDATE "${TABLE}" SET st='FREE' WHERE pk='${a.instanceArn}' AND sk='ip#10.0.0.9'`;
    expect(await errorName(client(a.credentials).send(new ExecuteStatementCommand({ Statement: statement })))).toBe(
      'AccessDeniedException',
    );
    expect(cloud.iam.counts.denied).toBe(deniedBefore + 1);
  });

  it('takes LeadingKeys from the key condition of an index Query, expression or legacy', async () => {
    const own = client(a.credentials);
    const query = (arn: string, legacy: boolean) =>
      own.send(
        new QueryCommand({
          TableName: TABLE,
          IndexName: CLAIMABLE_INDEX.name,
          ...(legacy
            ? {
                KeyConditions: {
                  [CLAIMABLE_INDEX.partitionKey]: { ComparisonOperator: 'EQ', AttributeValueList: [{ S: arn }] },
                },
              }
            : {
                KeyConditionExpression: '#p = :p',
                ExpressionAttributeNames: { '#p': CLAIMABLE_INDEX.partitionKey },
                ExpressionAttributeValues: { ':p': { S: arn } },
              }),
        }),
      );
    for (const legacy of [false, true]) {
      expect(await errorName(query(a.instanceArn, legacy))).toBe('allowed');
      expect(await errorName(query(b.instanceArn, legacy))).toBe('AccessDeniedException');
    }
  });

  it('takes dynamodb:Attributes from an update, expression or legacy: a lease state yes, a node phase no', async () => {
    const own = client(a.credentials);
    const update = (attribute: string, legacy: boolean) =>
      own.send(
        new UpdateItemCommand({
          TableName: TABLE,
          Key: leaseKey(a.instanceArn, '10.0.0.99'),
          ...(legacy
            ? { AttributeUpdates: { [attribute]: { Action: 'PUT', Value: { S: 'FREE' } } } }
            : {
                UpdateExpression: 'SET #a = :v',
                ExpressionAttributeNames: { '#a': attribute },
                ExpressionAttributeValues: { ':v': { S: 'FREE' } },
              }),
        }),
      );
    for (const legacy of [false, true]) {
      expect(await errorName(update(A.state, legacy))).toBe('allowed');
      expect(await errorName(update(A.phase, legacy))).toBe('AccessDeniedException');
    }
  });

  it('refuses a request whose expression it cannot read', async () => {
    const own = client(a.credentials);
    const bad = own.send(
      new UpdateItemCommand({
        TableName: TABLE,
        Key: leaseKey(a.instanceArn, '10.0.0.98'),
        UpdateExpression: 'SET #undefined = :v',
        ExpressionAttributeValues: { ':v': { S: 'x' } },
      }),
    );
    expect(await errorName(bad)).toBe('AccessDeniedException');
  });

  it('refuses a wrong secret, a missing or foreign session token, and a key IMDS never issued', async () => {
    const key = { TableName: TABLE, Key: nodeKey(a.instanceArn) };
    expect(await errorName(client({ ...a.credentials, secretAccessKey: 'guess' }).send(new GetItemCommand(key)))).toBe(
      'InvalidSignatureException',
    );
    const { sessionToken: _t, ...noToken } = a.credentials;
    expect(await errorName(client(noToken).send(new GetItemCommand(key)))).toBe('UnrecognizedClientException');
    expect(
      await errorName(
        client({ ...a.credentials, sessionToken: b.credentials.sessionToken }).send(new GetItemCommand(key)),
      ),
    ).toBe('UnrecognizedClientException');
    expect(
      await errorName(client({ accessKeyId: 'AKIAUNKNOWN', secretAccessKey: 'x' }).send(new GetItemCommand(key))),
    ).toBe('UnrecognizedClientException');
    // Positive control: the control plane's key passes.
    expect(
      await errorName(client({ accessKeyId: 'local', secretAccessKey: 'local' }).send(new GetItemCommand(key))),
    ).toBe('allowed');
  });

  it('refuses a signature more than five minutes old, and accepts the same request signed now', async () => {
    const url = new URL(cloud.endpoints.dynamodb);
    const body = JSON.stringify({ TableName: TABLE, Key: nodeKey(a.instanceArn) });
    const send = async (date: Date): Promise<string> => {
      const headers = signRequest(
        {
          method: 'POST',
          host: url.host,
          path: '/',
          headers: { 'content-type': 'application/x-amz-json-1.0', 'x-amz-target': 'DynamoDB_20120810.GetItem' },
          body,
        },
        { region: cloud.region, service: 'dynamodb', credentials: a.credentials, date },
      );
      const res = await fetch(url, { method: 'POST', headers, body });
      const text = await res.text();
      return res.status === 200 ? 'allowed' : (JSON.parse(text) as { __type: string }).__type.split('#')[1]!;
    };
    expect(await send(new Date())).toBe('allowed');
    expect(await send(new Date(Date.now() - 10 * 60_000))).toBe('InvalidSignatureException');
  });
});
