import { createHash, createHmac, type Hash, type Hmac } from 'node:crypto';
// Present transitively (the SDK's own signer); used only as an independent reference implementation.
import { SignatureV4 } from '@smithy/signature-v4';
import { describe, expect, it } from 'vitest';
import { amzDate, signRequest } from '../../shared/dynamo/sigv4.js';

/**
 * The published AWS Signature Version 4 test suite ("aws-sig-v4-test-suite", AWS General Reference): fixed
 * credentials, region us-east-1, service "service", 2015-08-30T12:36:00Z. Expected signatures are the suite's
 * `.authz` files, not output of this code.
 */
const SUITE = {
  region: 'us-east-1',
  service: 'service',
  credentials: { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' },
  date: new Date('2015-08-30T12:36:00Z'),
};
const CREDENTIAL = 'AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request';

describe('sigv4', () => {
  it('formats the signing time as SigV4 wants it', () => {
    expect(amzDate(SUITE.date)).toBe('20150830T123600Z');
  });

  it.each<{
    name: string;
    method: string;
    query: string;
    headers: Record<string, string>;
    body: string;
    authz: string;
  }>([
    {
      name: 'get-vanilla',
      method: 'GET',
      query: '',
      headers: {},
      body: '',
      authz: `${CREDENTIAL}, SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31`,
    },
    {
      name: 'post-vanilla',
      method: 'POST',
      query: '',
      headers: {},
      body: '',
      authz: `${CREDENTIAL}, SignedHeaders=host;x-amz-date, Signature=5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b`,
    },
    {
      name: 'post-x-www-form-urlencoded',
      method: 'POST',
      query: '',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: 'Param1=value1',
      authz: `${CREDENTIAL}, SignedHeaders=content-type;host;x-amz-date, Signature=ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a`,
    },
    {
      name: 'get-header-value-trim',
      method: 'GET',
      query: '',
      headers: { 'My-Header1': ' value1 ', 'My-Header2': ' "a   b   c" ' },
      body: '',
      authz: `${CREDENTIAL}, SignedHeaders=host;my-header1;my-header2;x-amz-date, Signature=acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736`,
    },
    {
      name: 'get-vanilla-query-order-key-case',
      method: 'GET',
      query: 'Param2=value2&Param1=value1',
      headers: {},
      body: '',
      authz: `${CREDENTIAL}, SignedHeaders=host;x-amz-date, Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500`,
    },
  ])('matches the AWS test suite case $name', ({ method, query, headers, body, authz }) => {
    const signed = signRequest({ method, host: 'example.amazonaws.com', path: '/', query, headers, body }, SUITE);
    expect(signed['authorization']).toBe(authz);
    expect(signed['x-amz-date']).toBe('20150830T123600Z');
  });

  it('agrees with @smithy/signature-v4 on a DynamoDB request with session credentials', async () => {
    const credentials = {
      accessKeyId: 'ASIAEXAMPLE',
      secretAccessKey: 'secret/with+chars',
      sessionToken: 'FwoGZXIvYXdzEXAMPLE//token==',
    };
    const body = JSON.stringify({ TableName: 'leases', Key: { pk: { S: 'arn:aws:ec2:x' }, sk: { S: 'ip#10.0.0.1' } } });
    const date = new Date('2026-01-02T03:04:05Z');
    const headers = {
      'content-type': 'application/x-amz-json-1.0',
      'x-amz-target': 'DynamoDB_20120810.GetItem',
      'content-length': String(Buffer.byteLength(body)),
    };
    const ours = signRequest(
      { method: 'POST', host: 'dynamodb.eu-west-1.amazonaws.com', path: '/', headers, body },
      { region: 'eu-west-1', service: 'dynamodb', credentials, date },
    );
    const smithy = new SignatureV4({
      credentials,
      region: 'eu-west-1',
      service: 'dynamodb',
      sha256: NodeSha256,
      applyChecksum: false,
    });
    const reference = await smithy.sign(
      {
        method: 'POST',
        protocol: 'https:',
        hostname: 'dynamodb.eu-west-1.amazonaws.com',
        path: '/',
        query: {},
        headers: { ...headers, host: 'dynamodb.eu-west-1.amazonaws.com' },
        body,
      },
      { signingDate: date },
    );
    expect(ours['authorization']).toBe(reference.headers['authorization']);
    expect(ours['x-amz-security-token']).toBe(credentials.sessionToken);
  });

  it('changes the signature when one byte of the body changes', () => {
    const sign = (body: string): string | undefined =>
      signRequest({ method: 'POST', host: 'h', path: '/', headers: {}, body }, SUITE)['authorization'];
    expect(sign('{"a":1}')).not.toBe(sign('{"a":2}'));
  });
});

/** The Checksum shape smithy wants, over node:crypto (the SDK's own Node hash does the same). */
class NodeSha256 {
  private readonly hash: Hash | Hmac;
  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    this.hash = secret === undefined ? createHash('sha256') : createHmac('sha256', toBytes(secret));
  }
  update(data: Uint8Array): void {
    this.hash.update(data);
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.hash.digest());
  }
  reset(): void {}
}

function toBytes(data: string | ArrayBuffer | ArrayBufferView): string | Uint8Array {
  if (typeof data === 'string') return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}
