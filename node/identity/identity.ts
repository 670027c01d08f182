import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { instanceArn } from '../../shared/domain/arn.js';
import type { AwsCredentials, IdentityDocument } from './imds.js';
import { DEFAULT_IMDS_ENDPOINT, ImdsClient } from './imds.js';

/** Who this node is, and what it signs DynamoDB requests with. */
export interface NodeIdentity {
  readonly document: IdentityDocument;
  readonly instanceArn: string;
  /** The partition of the instance ARN: the one IAM puts in `ec2:SourceInstanceARN`. */
  readonly partition: string;
  readonly credentials: AwsCredentials;
  /** Where it came from, for logs: `cache` costs no request at all. */
  readonly source: 'cache' | 'imds';
}

export interface IdentityOptions {
  readonly dataDir: string;
  readonly ttlS: number;
  readonly timeoutMs: number;
  /** From the netconf; else AWS_EC2_METADATA_SERVICE_ENDPOINT; else the link-local address. */
  readonly endpoint?: string;
  readonly env: NodeJS.ProcessEnv;
  readonly nowMs: number;
}

interface CacheFile {
  readonly endpoint: string;
  readonly fetchedAtMs: number;
  readonly document: IdentityDocument;
  /** Absent in a cache written before the partition was read: such a cache is not used. */
  readonly partition?: string;
  readonly credentials?: AwsCredentials;
}

/** Credentials this close to expiry are fetched again rather than reused from the cache. */
const CREDENTIAL_MARGIN_MS = 5 * 60_000;

function envCredentials(env: NodeJS.ProcessEnv): AwsCredentials | undefined {
  const accessKeyId = env['AWS_ACCESS_KEY_ID'];
  const secretAccessKey = env['AWS_SECRET_ACCESS_KEY'];
  if (!accessKeyId || !secretAccessKey) return undefined;
  const sessionToken = env['AWS_SESSION_TOKEN'];
  return { accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}) };
}

function readCache(path: string): CacheFile | undefined {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as CacheFile;
  } catch {
    return undefined;
  }
}

/**
 * Reads the identity document (and, without env credentials, the role's credentials) from IMDSv2, reusing a
 * copy on disk for `ttlS`: every CNI call is a fresh process, and three IMDS round trips per pod would cost more
 * than the claim itself. The copy is written 0600 through a temp file + rename, so a reader never sees half.
 */
export async function loadIdentity(options: IdentityOptions): Promise<NodeIdentity> {
  const endpoint = options.endpoint ?? options.env['AWS_EC2_METADATA_SERVICE_ENDPOINT'] ?? DEFAULT_IMDS_ENDPOINT;
  const fromEnv = envCredentials(options.env);
  const cachePath = join(options.dataDir, 'identity.json');
  const cached = readCache(cachePath);
  if (
    cached &&
    cached.endpoint === endpoint &&
    cached.partition !== undefined &&
    options.nowMs - cached.fetchedAtMs < options.ttlS * 1000 &&
    options.nowMs >= cached.fetchedAtMs &&
    (fromEnv || (cached.credentials && (cached.credentials.expirationMs ?? 0) - CREDENTIAL_MARGIN_MS > options.nowMs))
  ) {
    const { region, accountId, instanceId } = cached.document;
    const partition = cached.partition;
    return {
      document: cached.document,
      instanceArn: instanceArn(region, accountId, instanceId, partition),
      partition,
      credentials: fromEnv ?? cached.credentials!,
      source: 'cache',
    };
  }
  const imds = new ImdsClient(endpoint, options.timeoutMs);
  const document = await imds.identityDocument();
  const partition = await imds.partition(document.region);
  const credentials = fromEnv ?? (await imds.roleCredentials());
  const arn = instanceArn(document.region, document.accountId, document.instanceId, partition);
  const file: CacheFile = {
    endpoint,
    fetchedAtMs: options.nowMs,
    document,
    partition,
    ...(fromEnv ? {} : { credentials }),
  };
  try {
    mkdirSync(options.dataDir, { recursive: true, mode: 0o700 });
    const tmp = `${cachePath}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify(file), { mode: 0o600 });
    renameSync(tmp, cachePath);
  } catch {
    // A cache we cannot write only costs the next call three IMDS requests.
  }
  return { document, instanceArn: arn, partition, credentials, source: 'imds' };
}
