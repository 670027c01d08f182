import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * An HTTP pass-through in front of dynalite that records each DynamoDB operation (from X-Amz-Target), so tests
 * can hold the plugin to its request budget: ADD = Query + UpdateItem, DEL = UpdateItem.
 */
export interface CountingProxy {
  readonly endpoint: string;
  /** Operation names in arrival order, e.g. ['Query', 'UpdateItem']. */
  readonly operations: string[];
  /** How many more answers to UpdateItem to swallow after forwarding the request (the write lands, no reply). */
  swallowUpdates: number;
  /** How many more UpdateItems to refuse with a 503 without forwarding them (the write never lands). */
  refuseUpdates: number;
  close(): Promise<void>;
}

export async function startCountingProxy(target: string): Promise<CountingProxy> {
  const state = { swallowUpdates: 0, refuseUpdates: 0 };
  const operations: string[] = [];
  const upstream = new URL(target);
  const server = createServer((req, res) => {
    const op = String(req.headers['x-amz-target'] ?? '').split('.')[1];
    if (op) operations.push(op);
    if (op === 'UpdateItem' && state.swallowUpdates === 0 && state.refuseUpdates > 0) {
      state.refuseUpdates -= 1;
      req.resume();
      res.writeHead(503, { 'content-type': 'application/x-amz-json-1.0' }).end('{}');
      return;
    }
    const forward = request(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
      (up) => {
        if (op === 'UpdateItem' && state.swallowUpdates > 0) {
          state.swallowUpdates -= 1;
          up.resume(); // applied upstream; the client hears nothing and times out
          return;
        }
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    forward.on('error', () => res.writeHead(502).end());
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    operations,
    get refuseUpdates() {
      return state.refuseUpdates;
    },
    set refuseUpdates(n: number) {
      state.refuseUpdates = n;
    },
    get swallowUpdates() {
      return state.swallowUpdates;
    },
    set swallowUpdates(n: number) {
      state.swallowUpdates = n;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
