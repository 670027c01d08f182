import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { build } from 'esbuild';
import { afterEach, describe, expect, it } from 'vitest';
import { isTransient } from '../../shared/dynamo/errors.js';
import { defaultDynamoEndpoint, LightDynamoClient } from '../../shared/dynamo/light-client.js';
import { signRequest } from '../../shared/dynamo/sigv4.js';

interface Seen {
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

type Reply = { status: number; body: unknown } | 'hang' | 'drop';

/** A local HTTP server that answers each request with the next scripted reply (the last one repeats). */
async function scriptedServer(replies: Reply[]): Promise<{ endpoint: string; seen: Seen[]; server: Server }> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      const reply = replies[Math.min(seen.length - 1, replies.length - 1)]!;
      if (reply === 'hang') return;
      if (reply === 'drop') {
        req.socket.destroy();
        return;
      }
      res.writeHead(reply.status, { 'content-type': 'application/x-amz-json-1.0' });
      res.end(typeof reply.body === 'string' ? reply.body : JSON.stringify(reply.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  return { endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, server };
}

const servers: Server[] = [];
const clients: LightDynamoClient[] = [];

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
});

function client(
  endpoint: string,
  extra: ConstructorParameters<typeof LightDynamoClient>[0] = {},
): {
  api: LightDynamoClient;
  delaysMs: number[];
} {
  const delaysMs: number[] = [];
  const api = new LightDynamoClient({
    endpoint,
    region: 'eu-west-1',
    credentials: async () => ({ accessKeyId: 'AKID', secretAccessKey: 'secret', sessionToken: 'token' }),
    sleep: async (ms) => {
      delaysMs.push(ms);
    },
    // Generous: the machine is shared, and only the timeout test is about timing.
    timeoutMs: 10_000,
    ...extra,
  });
  clients.push(api);
  return { api, delaysMs };
}

const KEY = { pk: { S: 'a' }, sk: { S: 'b' } };

describe('Class: LightDynamoClient', () => {
  it('speaks the DynamoDB JSON protocol with a SigV4 signature over exactly what it sends', async () => {
    const { endpoint, seen } = await scriptedServer([{ status: 200, body: { Item: { pk: { S: 'a' } } } }]);
    const date = new Date('2026-01-01T00:00:00Z');
    const { api } = client(endpoint, { now: () => date });
    const out = await api.getItem({ TableName: 't', Key: KEY, ConsistentRead: true });
    expect(out.Item).toEqual({ pk: { S: 'a' } });
    const [req] = seen;
    expect(req?.headers['x-amz-target']).toBe('DynamoDB_20120810.GetItem');
    expect(req?.headers['content-type']).toBe('application/x-amz-json-1.0');
    expect(req?.headers['x-amz-security-token']).toBe('token');
    expect(JSON.parse(req!.body)).toEqual({ TableName: 't', Key: KEY, ConsistentRead: true });
    // Re-sign what the server received: the signature covers the headers and body that arrived.
    const host = new URL(endpoint).host;
    const resigned = signRequest(
      {
        method: 'POST',
        host,
        path: '/',
        headers: {
          'content-type': String(req?.headers['content-type']),
          'x-amz-target': String(req?.headers['x-amz-target']),
          'content-length': String(req?.headers['content-length']),
        },
        body: req!.body,
      },
      {
        region: 'eu-west-1',
        service: 'dynamodb',
        credentials: { accessKeyId: 'AKID', secretAccessKey: 'secret', sessionToken: 'token' },
        date,
      },
    );
    expect(req?.headers['authorization']).toBe(resigned['authorization']);
    expect(req?.headers['authorization']).toContain('/eu-west-1/dynamodb/aws4_request');
  });

  it('throws errors named by their DynamoDB type, without the namespace, carrying the returned item', async () => {
    const { endpoint, seen } = await scriptedServer([
      {
        status: 400,
        body: {
          __type: 'com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException',
          message: 'The conditional request failed',
          Item: { st: { S: 'CLAIMED' } },
        },
      },
    ]);
    const { api } = client(endpoint);
    const err = (await api.updateItem({ TableName: 't', Key: KEY }).catch((e: unknown) => e)) as Error & {
      Item?: unknown;
    };
    expect(err.name).toBe('ConditionalCheckFailedException');
    expect(err.message).toBe('The conditional request failed');
    expect(err.Item).toEqual({ st: { S: 'CLAIMED' } });
    expect(seen).toHaveLength(1);
  });

  it('retries a 500 and succeeds on the next attempt', async () => {
    const { endpoint, seen } = await scriptedServer([
      { status: 500, body: { __type: 'com.amazonaws.dynamodb.v20120810#InternalServerError', message: 'oops' } },
      { status: 503, body: '<html>bad gateway</html>' },
      { status: 200, body: { Items: [], Count: 0 } },
    ]);
    const { api, delaysMs } = client(endpoint);
    expect(await api.query({ TableName: 't' })).toEqual({ Items: [], Count: 0 });
    expect(seen).toHaveLength(3);
    expect(delaysMs).toHaveLength(2);
    // Full jitter under an exponential cap: 25 ms, then 50 ms.
    expect(delaysMs[0]).toBeLessThan(25);
    expect(delaysMs[1]).toBeLessThan(50);
  });

  it('retries throttling with a longer backoff, then gives up with the DynamoDB error', async () => {
    const throttle = {
      status: 400,
      body: {
        __type: 'com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException',
        message: 'Rate of requests exceeds the allowed throughput',
      },
    };
    const { endpoint, seen } = await scriptedServer([throttle]);
    const { api, delaysMs } = client(endpoint, { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 10_000 });
    const err = (await api.query({ TableName: 't' }).catch((e: unknown) => e)) as Error;
    expect(err.name).toBe('ProvisionedThroughputExceededException');
    expect(err.message).toMatch(/exceeds/);
    expect(seen).toHaveLength(3);
    expect(delaysMs).toHaveLength(2);
    expect(delaysMs.every((d) => d >= 0)).toBe(true);
    expect(delaysMs[1]).toBeLessThan(80);
    expect(isTransient(err)).toBe(true);
  });

  it('does not retry a client error such as a ValidationException', async () => {
    const { endpoint, seen } = await scriptedServer([
      { status: 400, body: { __type: 'com.amazon.coral.validate#ValidationException', message: 'bad expression' } },
    ]);
    const { api } = client(endpoint);
    const err = (await api.query({ TableName: 't' }).catch((e: unknown) => e)) as Error;
    expect(err.name).toBe('ValidationException');
    expect(seen).toHaveLength(1);
  });

  it('times out a request that gets no answer, retries it, and reports a TimeoutError', async () => {
    const { endpoint, seen } = await scriptedServer(['hang']);
    const { api, delaysMs } = client(endpoint, { timeoutMs: 150, maxAttempts: 2 });
    const err = (await api.getItem({ TableName: 't', Key: KEY }).catch((e: unknown) => e)) as Error;
    expect(err.name).toBe('TimeoutError');
    expect(err.message).toMatch(/timed out after 150 ms/);
    // One pause between two attempts. (Under load an attempt can time out before the server even logs it,
    // so the server-side count is only an upper bound.)
    expect(delaysMs).toHaveLength(1);
    expect(seen.length).toBeLessThanOrEqual(2);
  });

  it('retries a dropped connection', async () => {
    const { endpoint, seen } = await scriptedServer(['drop', { status: 200, body: {} }]);
    const { api } = client(endpoint);
    expect(await api.putItem({ TableName: 't', Item: KEY })).toEqual({});
    expect(seen).toHaveLength(2);
  });

  it('reports a refused connection with its code after its attempts', async () => {
    const { endpoint, server } = await scriptedServer([{ status: 200, body: {} }]);
    await new Promise((resolve) => server.close(resolve));
    const { api, delaysMs } = client(endpoint, { maxAttempts: 2 });
    const err = (await api.getItem({ TableName: 't', Key: KEY }).catch((e: unknown) => e)) as Error & { code?: string };
    expect(err.code).toBe('ECONNREFUSED');
    expect(delaysMs).toHaveLength(1);
  });

  it('finds its endpoint, region and credentials in the standard environment', async () => {
    const { endpoint, seen } = await scriptedServer([{ status: 200, body: {} }]);
    const saved = { ...process.env };
    try {
      process.env['AWS_ENDPOINT_URL_DYNAMODB'] = endpoint;
      process.env['AWS_REGION'] = 'ap-southeast-2';
      process.env['AWS_ACCESS_KEY_ID'] = 'AKIDENV';
      process.env['AWS_SECRET_ACCESS_KEY'] = 'env-secret';
      delete process.env['AWS_SESSION_TOKEN'];
      const api = new LightDynamoClient();
      clients.push(api);
      await api.deleteItem({ TableName: 't', Key: KEY });
      expect(seen[0]?.headers['authorization']).toContain('Credential=AKIDENV/');
      expect(seen[0]?.headers['authorization']).toContain('/ap-southeast-2/dynamodb/');
      expect(seen[0]?.headers['x-amz-security-token']).toBeUndefined();
    } finally {
      process.env = saved;
    }
    expect(defaultDynamoEndpoint('eu-west-1')).toBe('https://dynamodb.eu-west-1.amazonaws.com');
    expect(defaultDynamoEndpoint('cn-north-1')).toBe('https://dynamodb.cn-north-1.amazonaws.com.cn');
  });

  it('loads nothing from the AWS SDK at run time', async () => {
    const result = await build({
      entryPoints: ['shared/dynamo/light-client.ts'],
      bundle: true,
      platform: 'node',
      format: 'esm',
      write: false,
      metafile: true,
      logLevel: 'silent',
    });
    const inputs = Object.keys(result.metafile.inputs);
    expect(inputs.filter((p) => p.includes('node_modules'))).toEqual([]);
    expect(inputs).toContain('shared/dynamo/sigv4.ts');
    const bytes = result.outputFiles[0]?.contents.byteLength ?? 0;
    process.stdout.write(`light client bundle: ${bytes} bytes from ${inputs.length} files\n`);
  });
});
