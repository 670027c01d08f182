import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { BucketSpec } from '../../shared/data/catalog.js';
import { errorMessage } from '../../shared/errors.js';
import type { FaultSpec } from './faults.js';
import type { Ec2Simulator } from './simulator.js';
import type { Ec2Delays } from './world.js';

const MAX_BODY_BYTES = 1024 * 1024;

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new Error('request body too large');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function send(
  res: ServerResponse,
  statusCode: number,
  contentType: string,
  body: string,
  headers: Record<string, string> = {},
): void {
  res.writeHead(statusCode, { 'content-type': contentType, 'content-length': Buffer.byteLength(body), ...headers });
  res.end(body);
}

function sendJson(res: ServerResponse, statusCode: number, value: unknown): void {
  send(res, statusCode, 'application/json', JSON.stringify(value ?? {}));
}

/**
 * `/_admin/*` routes (JSON in, JSON out) onto the in-process admin methods, for tools outside the process
 * (`npm start`, the chaos runner, curl).
 */
function admin(sim: Ec2Simulator, method: string, path: string, body: Record<string, unknown>): unknown {
  const route = `${method} ${path}`;
  switch (route) {
    case 'GET /_admin/state':
      return sim.snapshot();
    case 'GET /_admin/counts':
      return sim.counts();
    case 'POST /_admin/counts/reset':
      sim.resetCounts();
      return {};
    case 'POST /_admin/faults':
      sim.failNext(body as unknown as FaultSpec);
      return {};
    case 'DELETE /_admin/faults':
      sim.clearFaults();
      return {};
    case 'POST /_admin/latency':
      if (typeof body['model'] === 'boolean') sim.setLatencyModel(body['model']);
      if (typeof body['extraRealMs'] === 'number') sim.addLatency(String(body['action'] ?? '*'), body['extraRealMs']);
      return {};
    case 'POST /_admin/buckets':
      if (typeof body['enabled'] === 'boolean') sim.setThrottling(body['enabled']);
      if (typeof body['key'] === 'string') sim.setBucket(body['key'], body as unknown as BucketSpec);
      return {};
    case 'POST /_admin/time-scale':
      sim.setTimeScale(Number(body['timeScale']));
      return {};
    case 'POST /_admin/delays': {
      const { scope, ...delays } = body;
      if (scope === 'describe' || scope === 'all') sim.setEventualConsistencyScope(scope);
      sim.setDelays(delays as Partial<Ec2Delays>);
      return {};
    }
    case 'POST /_admin/attachments':
      if (body['paused'] === true) sim.pauseAttachments();
      else sim.resumeAttachments();
      return {};
    case 'POST /_admin/vpcs':
      return sim.seedVpc(String(body['cidrBlock']));
    case 'POST /_admin/subnets': {
      const az = typeof body['availabilityZone'] === 'string' ? body['availabilityZone'] : undefined;
      const {
        pool: _pool,
        ipv6,
        tags: _tags,
        ...subnet
      } = sim.seedSubnet(String(body['vpcId']), String(body['cidrBlock']), az);
      return { ...subnet, ...(ipv6 ? { ipv6CidrBlock: ipv6.cidr } : {}) };
    }
    default:
      throw new RouteNotFound(route);
  }
}

class RouteNotFound extends Error {}

export interface RunningServer {
  readonly endpoint: string;
  close(): Promise<void>;
}

/** Listens on 127.0.0.1 (random port unless given): EC2 Query on `POST /`, admin on `/_admin/*`. */
export async function serve(sim: Ec2Simulator, port = 0): Promise<RunningServer> {
  const server: Server = createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://localhost');
      try {
        const text = await readBody(req);
        if (url.pathname.startsWith('/_admin/')) {
          const body = text ? (JSON.parse(text) as Record<string, unknown>) : {};
          sendJson(res, 200, admin(sim, req.method ?? 'GET', url.pathname, body));
          return;
        }
        const params = new URLSearchParams(req.method === 'GET' ? url.search : text);
        const result = await sim.handleQuery(params);
        send(res, result.statusCode, 'text/xml;charset=UTF-8', result.body, { 'x-amzn-requestid': result.requestId });
      } catch (err) {
        if (res.headersSent) return;
        if (err instanceof RouteNotFound) sendJson(res, 404, { error: `no admin route ${err.message}` });
        else sendJson(res, 400, { error: errorMessage(err) });
      }
    })();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  const { port: actual } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${actual}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
