import type { IncomingMessage, ServerResponse } from 'node:http';
import { VpcLeaseError } from '../../shared/errors.js';
import type { SimScheduler } from '../events/scheduler.js';
import type { Ec2SimulatorApi, SimInstance } from '../ports.js';
import type { HttpListener } from '../sqs/http-listener.js';
import { listen } from '../sqs/http-listener.js';
import type { InstanceRole } from './metadata.js';
import { listing, lookup, metadataTree } from './metadata.js';
import { ImdsTokens } from './tokens.js';

export class UnknownInstanceError extends VpcLeaseError {
  constructor(readonly instanceId: string) {
    super(`failed to serve IMDS for instance ${instanceId}: no such instance in the EC2 simulator`);
  }
}

export interface ImdsOptions {
  readonly ec2: Ec2SimulatorApi;
  readonly scheduler: SimScheduler;
  /** The instance profile role whose dummy credentials `iam/security-credentials/<role>` returns. */
  readonly role?: Partial<InstanceRole>;
  /**
   * Issues an instance its own role session (the local cloud registers it with the IAM endpoint, bound to
   * the instance); without it every instance gets the one fixed `role`'s keys.
   */
  readonly sessionFor?: (instance: SimInstance, roleName: string) => Omit<InstanceRole, 'name'>;
}

const TTL_HEADER = 'x-aws-ec2-metadata-token-ttl-seconds';
const TOKEN_HEADER = 'x-aws-ec2-metadata-token';
const CREDENTIALS_LIFETIME_MS = 6 * 3600 * 1000;

interface ImdsReply {
  readonly status: number;
  readonly body?: string;
  readonly headers?: Record<string, string>;
}

/**
 * IMDSv2 for simulated instances. Each instance gets its own loopback listener (`endpointFor`) so the paths
 * are exactly AWS's (`/latest/meta-data/...`) and a process pointed at it (AWS_EC2_METADATA_SERVICE_ENDPOINT,
 * or the CNI's IMDS endpoint setting) sees only its own instance, as on a real node. Session tokens are
 * required for every GET (IMDSv2 only, HttpTokens=required), and per instance.
 */
export class ImdsService {
  private readonly listeners = new Map<string, Promise<HttpListener>>();
  private readonly role: InstanceRole;

  constructor(private readonly options: ImdsOptions) {
    this.role = {
      name: options.role?.name ?? 'vpc-lease-node',
      accessKeyId: options.role?.accessKeyId ?? 'ASIALOCALCLOUDNODE00',
      secretAccessKey: options.role?.secretAccessKey ?? 'local-cloud-node-secret',
      sessionToken: options.role?.sessionToken ?? 'local-cloud-node-session-token',
    };
  }

  /** The instance's IMDS base URL (`http://127.0.0.1:<port>`), started on first use. */
  endpointFor(instanceId: string): Promise<string> {
    if (!this.options.ec2.getInstance(instanceId)) return Promise.reject(new UnknownInstanceError(instanceId));
    let listener = this.listeners.get(instanceId);
    if (!listener) {
      const tokens = new ImdsTokens(this.options.scheduler);
      listener = listen((request, _body, response) => this.handle(instanceId, tokens, request, response));
      this.listeners.set(instanceId, listener);
    }
    return listener.then((l) => l.url);
  }

  async close(): Promise<void> {
    const listeners = [...this.listeners.values()];
    this.listeners.clear();
    await Promise.all(listeners.map(async (l) => (await l).close()));
  }

  private handle(instanceId: string, tokens: ImdsTokens, request: IncomingMessage, response: ServerResponse): void {
    const { status, body = '', headers = {} } = this.answer(instanceId, tokens, request);
    response.writeHead(status, {
      'content-type': 'text/plain',
      'content-length': String(Buffer.byteLength(body)),
      server: 'EC2ws',
      ...headers,
    });
    response.end(body);
  }

  private answer(instanceId: string, tokens: ImdsTokens, request: IncomingMessage): ImdsReply {
    const path = new URL(request.url ?? '/', 'http://imds').pathname;
    if (path === '/latest/api/token') {
      if (request.method !== 'PUT') return { status: 405 };
      // IMDS refuses token requests that went through a proxy.
      if (request.headers['x-forwarded-for'] !== undefined) return { status: 403 };
      const ttlS = Number(request.headers[TTL_HEADER]);
      if (!Number.isInteger(ttlS) || ttlS < 1 || ttlS > 21_600) return { status: 400 };
      return { status: 200, body: tokens.issue(ttlS), headers: { [TTL_HEADER]: String(ttlS) } };
    }
    if (request.method !== 'GET' && request.method !== 'HEAD') return { status: 405 };
    const token = request.headers[TOKEN_HEADER];
    const remainingS = typeof token === 'string' ? tokens.remainingS(token) : undefined;
    if (remainingS === undefined) return { status: 401 };
    const headers = { [TTL_HEADER]: String(remainingS) };
    const instance = this.options.ec2.getInstance(instanceId);
    if (!instance) return { status: 404 };
    const segments = path.split('/').filter(Boolean);
    const version = segments.shift();
    if (version === undefined) return { status: 200, body: 'latest', headers };
    if (version !== 'latest' && !/^\d{4}-\d{2}-\d{2}$/.test(version)) return { status: 404 };
    const nowMs = this.options.scheduler.clock.nowMs();
    const role = this.options.sessionFor
      ? { ...this.options.sessionFor(instance, this.role.name), name: this.role.name }
      : this.role;
    const tree = metadataTree(this.options.ec2, instance, role, nowMs + CREDENTIALS_LIFETIME_MS, nowMs);
    const node = lookup(tree, segments);
    if (node === undefined) return { status: 404 };
    return { status: 200, body: typeof node === 'string' ? node : listing(node), headers };
  }
}
