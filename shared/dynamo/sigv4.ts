import { createHash, createHmac } from 'node:crypto';

/**
 * AWS Signature Version 4 over node:crypto — the part of the SDK the CNI binary needs, without loading the SDK.
 * Header-based signing only (no presigning, no chunked payloads, no S3 path rules): enough for the JSON
 * protocol services, and checked against AWS's published test suite and @smithy/signature-v4.
 */
export interface AwsCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
}

export interface SignableRequest {
  readonly method: string;
  readonly host: string;
  /** Already URI-encoded as it goes on the wire, e.g. `/`. */
  readonly path: string;
  /** Raw query string without `?`, e.g. `a=1&b=2`; may be empty. */
  readonly query?: string;
  /** Header names in any case; values are trimmed and their inner whitespace collapsed for signing. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string | Uint8Array;
}

export interface SigningScope {
  readonly region: string;
  readonly service: string;
  readonly credentials: AwsCredentials;
  /** The signing time; AWS rejects requests more than 5 minutes off its clock. */
  readonly date: Date;
}

const ALGORITHM = 'AWS4-HMAC-SHA256';

/** `20150830T123600Z`, the basic ISO 8601 form SigV4 uses. */
export function amzDate(date: Date): string {
  return date
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');
}

export function sha256Hex(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

function hmac(key: string | Buffer, data: string): Buffer {
  return createHmac('sha256', key).update(data, 'utf8').digest();
}

/** RFC 3986 encoding as SigV4 wants it: encodeURIComponent leaves !'()* alone, SigV4 does not. */
function uriEncode(text: string): string {
  return encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function canonicalQuery(query: string): string {
  if (query === '') return '';
  const pairs = query.split('&').map((part) => {
    const eq = part.indexOf('=');
    const key = eq < 0 ? part : part.slice(0, eq);
    const value = eq < 0 ? '' : part.slice(eq + 1);
    return [uriEncode(decodeURIComponent(key)), uriEncode(decodeURIComponent(value))] as const;
  });
  // Sorted by encoded key, then by encoded value (the suite's get-vanilla-query-order-* cases).
  pairs.sort(([ak, av], [bk, bv]) => (ak < bk ? -1 : ak > bk ? 1 : av < bv ? -1 : av > bv ? 1 : 0));
  return pairs.map(([k, v]) => `${k}=${v}`).join('&');
}

/** Non-S3 services sign the path with each segment encoded once more. */
function canonicalPath(path: string): string {
  return path
    .split('/')
    .map((segment) => uriEncode(segment))
    .join('/');
}

/**
 * Returns the headers to send: the caller's, plus `host`, `x-amz-date`, `x-amz-security-token` (with session
 * credentials) and `authorization`. Every header passed in is signed.
 */
export function signRequest(request: SignableRequest, scope: SigningScope): Record<string, string> {
  const stamp = amzDate(scope.date);
  const day = stamp.slice(0, 8);
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(request.headers)) headers[name.toLowerCase()] = value;
  headers['host'] = request.host;
  headers['x-amz-date'] = stamp;
  if (scope.credentials.sessionToken) headers['x-amz-security-token'] = scope.credentials.sessionToken;

  const names = Object.keys(headers).sort();
  const canonicalHeaders = names.map((n) => `${n}:${(headers[n] ?? '').trim().replace(/\s+/g, ' ')}\n`).join('');
  const signedHeaders = names.join(';');
  const canonicalRequest = [
    request.method.toUpperCase(),
    canonicalPath(request.path),
    canonicalQuery(request.query ?? ''),
    canonicalHeaders,
    signedHeaders,
    sha256Hex(request.body),
  ].join('\n');

  const credentialScope = `${day}/${scope.region}/${scope.service}/aws4_request`;
  const stringToSign = [ALGORITHM, stamp, credentialScope, sha256Hex(canonicalRequest)].join('\n');
  const kDate = hmac(`AWS4${scope.credentials.secretAccessKey}`, day);
  const kSigning = hmac(hmac(hmac(kDate, scope.region), scope.service), 'aws4_request');
  const signature = createHmac('sha256', kSigning).update(stringToSign, 'utf8').digest('hex');

  headers['authorization'] =
    `${ALGORITHM} Credential=${scope.credentials.accessKeyId}/${credentialScope}, ` +
    `SignedHeaders=${signedHeaders}, Signature=${signature}`;
  return headers;
}
