import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * An HTTP proxy in front of a local service that counts requests by operation — DynamoDB's `X-Amz-Target`
 * (`DynamoDB_20120810.Query` → `Query`), or the EC2 Query protocol's `Action`. Counting on the wire sees what
 * a client really sends (retries included), also from a child process no in-process wrapper could reach.
 * With no upstream it answers 500 to everything: a trap that proves a client never called (EC2 from a node).
 *
 * With `capacity`, it asks DynamoDB (dynalite computes it as DynamoDB does, from item sizes) for the capacity
 * each request consumed — `ReturnConsumedCapacity: TOTAL` added to the request, read back from the answer —
 * which is what on-demand billing charges. dynalite does not verify signatures, so the rewritten body passes.
 */
export interface RequestCounter {
  readonly endpoint: string;
  readonly counts: Map<string, number>;
  /** Capacity units consumed, by operation (only with `capacity`). */
  readonly units: Map<string, number>;
  /**
   * Share of DynamoDB requests answered ProvisionedThroughputExceededException without reaching the table
   * (chaos: DynamoDB throttling); drawn from `random`. Counted in `throttled`, not in `counts`.
   */
  faultRate: number;
  readonly throttled: Map<string, number>;
  total(): number;
  reset(): void;
  close(): Promise<void>;
}

const CAPACITY_OPERATIONS = new Set([
  'GetItem',
  'PutItem',
  'UpdateItem',
  'DeleteItem',
  'Query',
  'Scan',
  'BatchWriteItem',
  'BatchGetItem',
]);

function operationOf(target: string | undefined, body: string): string {
  if (target) return target.split('.').pop() ?? target;
  const action = /(?:^|&)Action=([^&]+)/.exec(body)?.[1];
  return action ? decodeURIComponent(action) : 'unknown';
}

function consumedUnits(body: string): number {
  try {
    const parsed = JSON.parse(body) as { ConsumedCapacity?: { CapacityUnits?: number } | { CapacityUnits?: number }[] };
    const cc = parsed.ConsumedCapacity;
    const list = Array.isArray(cc) ? cc : cc ? [cc] : [];
    return list.reduce((s, c) => s + (c.CapacityUnits ?? 0), 0);
  } catch {
    return 0;
  }
}

export interface RequestCounterOptions {
  readonly capacity?: boolean;
  readonly random?: () => number;
}

export async function startRequestCounter(
  upstream?: string,
  options: RequestCounterOptions = {},
): Promise<RequestCounter> {
  const counts = new Map<string, number>();
  const throttled = new Map<string, number>();
  const random = options.random ?? Math.random;
  const state = { faultRate: 0 };
  const units = new Map<string, number>();
  const target = upstream ? new URL(upstream) : undefined;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let body = Buffer.concat(chunks);
      const op = operationOf(req.headers['x-amz-target'] as string | undefined, body.toString('utf8'));
      if (state.faultRate > 0 && req.headers['x-amz-target'] && random() < state.faultRate) {
        throttled.set(op, (throttled.get(op) ?? 0) + 1);
        res.writeHead(400, { 'content-type': 'application/x-amz-json-1.0' }).end(
          JSON.stringify({
            __type: 'com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException',
            message: 'The level of configured provisioned throughput for the table was exceeded.',
          }),
        );
        return;
      }
      counts.set(op, (counts.get(op) ?? 0) + 1);
      if (!target) {
        res.writeHead(500, { 'content-type': 'application/json' }).end('{"__type":"InternalFailure"}');
        return;
      }
      // A node's session-signed request passes byte for byte: the enforcing endpoint checks its body's signature.
      const measure =
        options.capacity === true && CAPACITY_OPERATIONS.has(op) && req.headers['x-amz-security-token'] === undefined;
      if (measure) {
        const input = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
        input['ReturnConsumedCapacity'] = 'TOTAL';
        body = Buffer.from(JSON.stringify(input));
      }
      // The client's Host stays: the IAM-enforcing endpoint behind verifies the SigV4 signature made over it.
      const headers = { ...req.headers, host: req.headers.host ?? target.host, 'content-length': String(body.length) };
      const forward = request(
        { host: target.hostname, port: target.port, method: req.method, path: req.url, headers },
        (up) => {
          if (!measure) {
            res.writeHead(up.statusCode ?? 502, up.headers);
            up.pipe(res);
            return;
          }
          const out: Buffer[] = [];
          up.on('data', (c: Buffer) => out.push(c));
          up.on('end', () => {
            const answer = Buffer.concat(out);
            units.set(op, (units.get(op) ?? 0) + consumedUnits(answer.toString('utf8')));
            // The body is passed on unchanged; its checksum header stays valid.
            res.writeHead(up.statusCode ?? 502, up.headers).end(answer);
          });
        },
      );
      forward.on('error', () => res.writeHead(502).end());
      forward.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    counts,
    units,
    throttled,
    get faultRate() {
      return state.faultRate;
    },
    set faultRate(rate: number) {
      state.faultRate = rate;
    },
    total: () => [...counts.values()].reduce((s, n) => s + n, 0),
    reset: () => {
      counts.clear();
      units.clear();
      throttled.clear();
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
