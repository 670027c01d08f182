import type { IncomingHttpHeaders } from 'node:http';
import type { AwsCredentials } from '../../shared/dynamo/sigv4.js';
import { signRequest } from '../../shared/dynamo/sigv4.js';

/** The parts of a SigV4 Authorization header the endpoint checks. */
export interface SigV4Authorization {
  readonly accessKeyId: string;
  readonly day: string;
  readonly region: string;
  readonly service: string;
  readonly signedHeaders: readonly string[];
  readonly signature: string;
}

const AUTHORIZATION =
  /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$/;

export function parseAuthorization(header: string | undefined): SigV4Authorization | undefined {
  const m = header ? AUTHORIZATION.exec(header) : null;
  if (!m) return undefined;
  return {
    accessKeyId: m[1]!,
    day: m[2]!,
    region: m[3]!,
    service: m[4]!,
    signedHeaders: m[5]!.split(';'),
    signature: m[6]!,
  };
}

/** `20150830T123600Z` → epoch ms; undefined when malformed. */
function parseAmzDate(value: string | undefined): number | undefined {
  const m = value ? /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(value) : null;
  return m ? Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!) : undefined;
}

/** AWS refuses a signature more than 5 minutes away from its clock. */
const MAX_SKEW_MS = 5 * 60_000;

/**
 * Recomputes the request's signature with the secret the endpoint issued (shared/dynamo/sigv4.ts, itself
 * checked against AWS's suite) over exactly the headers the client signed; a mismatch, another scope or a
 * stale date is a failed check, as in AWS.
 */
export function signatureMatches(
  auth: SigV4Authorization,
  request: { method: string; path: string; headers: IncomingHttpHeaders; body: Buffer },
  credentials: AwsCredentials,
  nowMs: number,
): boolean {
  const amzDate = request.headers['x-amz-date'];
  const signedAtMs = parseAmzDate(typeof amzDate === 'string' ? amzDate : undefined);
  if (signedAtMs === undefined || Math.abs(nowMs - signedAtMs) > MAX_SKEW_MS) return false;
  if (!auth.signedHeaders.includes('host') || typeof request.headers.host !== 'string') return false;
  const headers: Record<string, string> = {};
  for (const name of auth.signedHeaders) {
    const value = request.headers[name];
    if (value === undefined) return false;
    // signRequest adds these three itself, from the host, the date and the credentials.
    if (name === 'host' || name === 'x-amz-date' || name === 'x-amz-security-token') continue;
    headers[name] = Array.isArray(value) ? value.join(',') : value;
  }
  const expected = signRequest(
    { method: request.method, host: request.headers.host, path: request.path, headers, body: request.body },
    { region: auth.region, service: auth.service, credentials, date: new Date(signedAtMs) },
  );
  const recomputed = parseAuthorization(expected['authorization']);
  return (
    recomputed !== undefined &&
    recomputed.signature === auth.signature &&
    recomputed.signedHeaders.join(';') === auth.signedHeaders.join(';')
  );
}
