import type { Agent as HttpAgent, IncomingMessage, RequestOptions } from 'node:http';
import { Agent, request as httpRequest } from 'node:http';
import { dnsSuffixOfRegion } from '../domain/partition.js';
import { ValidationError } from '../errors.js';
import { sleepMs } from '../sleep.js';
import type { DynamoApi } from './api.js';
import { type CredentialsProvider, envCredentials } from './credentials.js';
import { DynamoServiceError, isThrottling, isTransient } from './errors.js';
import { signRequest } from './sigv4.js';

export interface LightClientOptions {
  /** Default: AWS_REGION, then AWS_DEFAULT_REGION. */
  readonly region?: string;
  /** Default: AWS_ENDPOINT_URL_DYNAMODB, then AWS_ENDPOINT_URL, then `https://dynamodb.<region>.<suffix>`. */
  readonly endpoint?: string;
  /** Default: the AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN variables. */
  readonly credentials?: CredentialsProvider;
  /** Whole-request budget per attempt (connect + send + response). Default 2000. */
  readonly timeoutMs?: number;
  /** Attempts per call, the first included. Default 4. */
  readonly maxAttempts?: number;
  /** Backoff base; attempt n waits a random time in [0, min(maxDelayMs, baseDelayMs * 2^n)) ("full jitter"). */
  readonly baseDelayMs?: number;
  readonly maxDelayMs?: number;
  /** Wall clock for signing (tests). */
  readonly now?: () => Date;
  /** Pause between attempts (tests). */
  readonly sleep?: (ms: number) => Promise<void>;
}

const TARGET_PREFIX = 'DynamoDB_20120810.';
const CONTENT_TYPE = 'application/x-amz-json-1.0';
/** Throttling backs off from a larger base: DynamoDB needs time to re-split or refill, not an instant retry. */
const THROTTLE_BASE_FACTOR = 4;

export function defaultDynamoEndpoint(region: string): string {
  return `https://dynamodb.${region}.${dnsSuffixOfRegion(region)}`;
}

interface HttpResponse {
  readonly statusCode: number;
  readonly body: string;
}

type RequestFn = (
  options: RequestOptions,
  onResponse: (res: IncomingMessage) => void,
) => ReturnType<typeof httpRequest>;

/**
 * DynamoApi over node:http(s) and our own SigV4 — the CNI binary's client. Its start-up cost is the point: no
 * SDK, no global fetch (lazy-loads undici), node:https only when the endpoint is https.
 * Type-only imports from @aws-sdk: nothing of it is loaded at run time.
 */
export class LightDynamoClient implements DynamoApi {
  private readonly url: URL;
  private readonly region: string;
  private readonly credentials: CredentialsProvider;
  private readonly timeoutMs: number;
  private readonly maxAttempts: number;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly now: () => Date;
  private readonly sleep: (ms: number) => Promise<void>;
  private transport?: Promise<{ request: RequestFn; agent: HttpAgent }>;

  constructor(options: LightClientOptions = {}) {
    const region = options.region ?? process.env['AWS_REGION'] ?? process.env['AWS_DEFAULT_REGION'];
    if (!region) throw new ValidationError('no region for the DynamoDB client: set AWS_REGION');
    this.region = region;
    const endpoint =
      options.endpoint ??
      process.env['AWS_ENDPOINT_URL_DYNAMODB'] ??
      process.env['AWS_ENDPOINT_URL'] ??
      defaultDynamoEndpoint(region);
    this.url = new URL(endpoint);
    if (this.url.protocol !== 'http:' && this.url.protocol !== 'https:') {
      throw new ValidationError(`invalid DynamoDB endpoint ${JSON.stringify(endpoint)}`);
    }
    this.credentials = options.credentials ?? envCredentials;
    this.timeoutMs = options.timeoutMs ?? 2000;
    this.maxAttempts = Math.max(1, options.maxAttempts ?? 4);
    this.baseDelayMs = options.baseDelayMs ?? 25;
    this.maxDelayMs = options.maxDelayMs ?? 1000;
    this.now = options.now ?? (() => new Date());
    this.sleep = options.sleep ?? sleepMs;
  }

  readonly getItem: DynamoApi['getItem'] = (input) => this.call('GetItem', input);
  readonly putItem: DynamoApi['putItem'] = (input) => this.call('PutItem', input);
  readonly updateItem: DynamoApi['updateItem'] = (input) => this.call('UpdateItem', input);
  readonly deleteItem: DynamoApi['deleteItem'] = (input) => this.call('DeleteItem', input);
  readonly query: DynamoApi['query'] = (input) => this.call('Query', input);
  readonly scan: DynamoApi['scan'] = (input) => this.call('Scan', input);
  readonly batchWriteItem: DynamoApi['batchWriteItem'] = (input) => this.call('BatchWriteItem', input);

  /** Closes idle keep-alive sockets (they are unref'd, so a process exits without this). */
  async close(): Promise<void> {
    if (this.transport) (await this.transport).agent.destroy();
  }

  private async call<T>(operation: string, input: unknown): Promise<T> {
    const body = JSON.stringify(input);
    for (let attempt = 1; ; attempt++) {
      try {
        const res = await this.send(operation, body);
        if (res.statusCode >= 200 && res.statusCode < 300) return JSON.parse(res.body) as T;
        throw parseError(res);
      } catch (err) {
        if (attempt >= this.maxAttempts || !isTransient(err)) throw err;
        const base = isThrottling(err) ? this.baseDelayMs * THROTTLE_BASE_FACTOR : this.baseDelayMs;
        await this.sleep(Math.random() * Math.min(this.maxDelayMs, base * 2 ** (attempt - 1)));
      }
    }
  }

  private loadTransport(): Promise<{ request: RequestFn; agent: HttpAgent }> {
    // Keep-alive: the CNI's ADD is two requests (Query, Update); the second reuses the first's connection
    // (and its TLS session) instead of paying a handshake again.
    this.transport ??=
      this.url.protocol === 'https:'
        ? import('node:https').then((https) => ({
            request: https.request as RequestFn,
            agent: new https.Agent({ keepAlive: true }),
          }))
        : Promise.resolve({ request: httpRequest as RequestFn, agent: new Agent({ keepAlive: true }) });
    return this.transport;
  }

  private async send(operation: string, body: string): Promise<HttpResponse> {
    const [{ request, agent }, credentials] = await Promise.all([this.loadTransport(), this.credentials()]);
    const headers = signRequest(
      {
        method: 'POST',
        host: this.url.host,
        path: '/',
        headers: {
          'content-type': CONTENT_TYPE,
          'x-amz-target': `${TARGET_PREFIX}${operation}`,
          'content-length': String(Buffer.byteLength(body)),
        },
        body,
      },
      { region: this.region, service: 'dynamodb', credentials, date: this.now() },
    );
    return new Promise<HttpResponse>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const settle = (fn: () => void): void => {
        // Cleared before settling: a late timer must never destroy a socket the pool has handed to another call.
        clearTimeout(timer);
        fn();
      };
      const req = request(
        {
          protocol: this.url.protocol,
          hostname: this.url.hostname,
          port: this.url.port,
          path: '/',
          method: 'POST',
          headers,
          agent,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('error', (err) => settle(() => reject(err)));
          res.on('end', () =>
            settle(() => resolve({ statusCode: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') })),
          );
        },
      );
      // One budget for the whole exchange: socket idle timeouts alone would let a trickling response hang on.
      timer = setTimeout(() => {
        const err = new Error(`DynamoDB ${operation} timed out after ${this.timeoutMs} ms`);
        err.name = 'TimeoutError';
        req.destroy(err);
      }, this.timeoutMs);
      req.on('error', (err) => settle(() => reject(err)));
      req.end(body);
    });
  }
}

function parseError(res: HttpResponse): DynamoServiceError {
  let type = res.statusCode >= 500 ? 'InternalServerError' : 'UnknownError';
  let message = `HTTP ${res.statusCode}`;
  let item: Record<string, unknown> | undefined;
  try {
    const parsed = JSON.parse(res.body) as { __type?: string; message?: string; Message?: string; Item?: unknown };
    if (parsed.__type) type = parsed.__type.slice(parsed.__type.lastIndexOf('#') + 1);
    message = parsed.message ?? parsed.Message ?? message;
    if (parsed.Item && typeof parsed.Item === 'object') item = parsed.Item as Record<string, unknown>;
  } catch {
    // A proxy's HTML error page, or a truncated body: keep the HTTP status as the message.
  }
  return new DynamoServiceError(type, message, res.statusCode, item);
}
