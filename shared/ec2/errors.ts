import { errorMessage, VpcLeaseError } from '../errors.js';

/**
 * How the control plane reacts to an EC2 error:
 * - throttling: the SDK's adaptive retries were not enough — persist progress and re-enqueue with a delay;
 * - unavailable: 5xx or no answer — same reaction as throttling;
 * - not-found-yet: eventual consistency (a resource created a moment ago is not visible yet) — retry later;
 * - limit: a quota or capacity is reached (subnet full, attachment limit) — try elsewhere or abandon;
 * - fatal: the request can never succeed as given (bad parameter, no permission) — abandon.
 */
export type Ec2ErrorKind = 'throttling' | 'unavailable' | 'not-found-yet' | 'limit' | 'fatal';

const THROTTLING = new Set([
  'RequestLimitExceeded',
  'Throttling',
  'ThrottlingException',
  'RequestThrottled',
  'RequestThrottledException',
  'TooManyRequestsException',
  'SlowDown',
]);

const UNAVAILABLE = new Set(['InternalError', 'InternalFailure', 'ServiceUnavailable', 'Unavailable', 'TimeoutError']);

// Resources this control plane creates or that were just created elsewhere: "not found" means "not yet
// propagated" (EC2 is eventually consistent). A configured subnet or security group that is not found is a
// configuration error instead, so those codes are fatal.
const NOT_FOUND_YET = new Set([
  'InvalidNetworkInterfaceID.NotFound',
  'InvalidNetworkInterfaceId.NotFound',
  'InvalidInstanceID.NotFound',
  'InvalidAttachmentID.NotFound',
  'IncorrectState',
  'IncorrectInstanceState',
]);

const LIMIT = new Set([
  'InsufficientFreeAddressesInSubnet',
  'InsufficientCidrBlocks',
  'AttachmentLimitExceeded',
  'PrivateIpAddressLimitExceeded',
  'NetworkInterfaceLimitExceeded',
  'AddressLimitExceeded',
]);

export function classifyEc2Code(code: string, httpStatus?: number): Ec2ErrorKind {
  if (THROTTLING.has(code)) return 'throttling';
  if (UNAVAILABLE.has(code)) return 'unavailable';
  if (NOT_FOUND_YET.has(code)) return 'not-found-yet';
  if (LIMIT.has(code)) return 'limit';
  if (httpStatus !== undefined && httpStatus >= 500) return 'unavailable';
  return 'fatal';
}

/** An EC2 call that failed, with its AWS error code and how to react to it. */
export class Ec2ApiError extends VpcLeaseError {
  constructor(
    readonly action: string,
    readonly code: string,
    readonly kind: Ec2ErrorKind,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  /** Worth trying again later, unchanged. */
  get retryable(): boolean {
    return this.kind === 'throttling' || this.kind === 'unavailable' || this.kind === 'not-found-yet';
  }
}

/** Wraps whatever the SDK threw into an Ec2ApiError; network errors (no HTTP answer) are `unavailable`. */
export function toEc2ApiError(action: string, err: unknown): Ec2ApiError {
  if (err instanceof Ec2ApiError) return err;
  const e = err as { name?: unknown; Code?: unknown; code?: unknown; $metadata?: { httpStatusCode?: number } };
  const status = e?.$metadata?.httpStatusCode;
  const code =
    typeof e?.Code === 'string'
      ? e.Code
      : typeof e?.name === 'string' && e.name !== 'Error'
        ? e.name
        : typeof e?.code === 'string'
          ? e.code
          : 'Unknown';
  const classified = classifyEc2Code(code, status);
  // No HTTP status at all: the request never got an answer (connection refused or reset, timeout).
  const kind = classified === 'fatal' && status === undefined ? 'unavailable' : classified;
  return new Ec2ApiError(action, code, kind, `failed to call EC2 ${action}: ${code}: ${errorMessage(err)}`, {
    cause: err,
  });
}

export function isEc2Error(err: unknown, ...kinds: Ec2ErrorKind[]): err is Ec2ApiError {
  return err instanceof Ec2ApiError && (kinds.length === 0 || kinds.includes(err.kind));
}
