import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { errorMessage, ValidationError } from '../../shared/errors.js';
import type { AgentHealth } from '../agent/observer.js';
import { EXPOSITION_CONTENT_TYPE, renderExposition } from './exposition.js';
import type { Registry } from './registry.js';

/** Outside Linux's ephemeral range (32768-60999) and beside aws-node's 61678/61679, which never run with us. */
export const DEFAULT_METRICS_PORT = 61680;
/** Loopback unless the operator opts in: the port is unauthenticated and on the host network (README, Metrics). */
export const DEFAULT_METRICS_HOST = '127.0.0.1';
export const METRICS_ADDRESS_ENV = 'VPC_LEASE_METRICS_ADDRESS';

export interface MetricsListen {
  readonly host: string;
  readonly port: number;
}

/**
 * `VPC_LEASE_METRICS_ADDRESS`: `host:port`, `[v6]:port`, `:port` (loopback, another port; 0 lets the kernel pick,
 * as tests and `npm start` do) or `off`; unset means
 * loopback on the default port. Returns undefined for `off`.
 */
export function metricsListenFromEnv(env: NodeJS.ProcessEnv): MetricsListen | undefined {
  const raw = env[METRICS_ADDRESS_ENV]?.trim();
  if (!raw) return { host: DEFAULT_METRICS_HOST, port: DEFAULT_METRICS_PORT };
  if (raw === 'off') return undefined;
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(raw);
  const port = Number(match?.[3]);
  if (!match || port > 65535)
    throw new ValidationError(`${METRICS_ADDRESS_ENV}=${JSON.stringify(raw)}: expected host:port, :port or off`);
  return { host: match[1] ?? (match[2] || DEFAULT_METRICS_HOST), port };
}

export interface MetricsServer {
  /** `http://host:port/metrics`, with the port actually bound (0 asks the kernel for one). */
  readonly url: string;
  close(): Promise<void>;
}

/** The DaemonSet's liveness and readiness probes (httpGet): 200 while the agent serves its socket, else 503. */
export const HEALTH_PATH = '/healthz';

/** Serves GET /metrics from the registry, and /healthz from `health` when given; anything else is 404 or 405. */
export async function startMetricsServer(
  registry: Registry,
  listen: MetricsListen,
  health?: () => Promise<AgentHealth>,
): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === HEALTH_PATH && health) {
      // The pid says which agent answered: during a handoff two take turns on this port.
      void health().then(({ ok, reason }) =>
        res.writeHead(ok ? 200 : 503, { 'content-type': 'text/plain' }).end(`${reason} (pid ${process.pid})\n`),
      );
      return;
    }
    if (path !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('only /metrics is served here\n');
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain' }).end('GET /metrics\n');
      return;
    }
    registry
      .collect()
      .then((families) => {
        const body = renderExposition(families);
        res.writeHead(200, { 'content-type': EXPOSITION_CONTENT_TYPE, 'content-length': Buffer.byteLength(body) });
        res.end(req.method === 'HEAD' ? undefined : body);
      })
      .catch((err: unknown) => {
        res.writeHead(500, { 'content-type': 'text/plain' }).end(`cannot render metrics: ${errorMessage(err)}\n`);
      });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(listen.port, listen.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { address, port } = server.address() as AddressInfo;
  const host = address.includes(':') ? `[${address}]` : address;
  return {
    url: `http://${host}:${port}/metrics`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
