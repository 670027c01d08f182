import { errorMessage, VpcLeaseError } from '../errors.js';

/**
 * How the control plane reacts to an EC2 error:
 * - throttling: the SDK's adaptive retries were not enough — persist progress and re-enqueue with a delay;
 * - unavailable: 5xx or no answer — same reaction as throttling;
 * - not-found-yet: eventual consistency (a resource created a moment ago is not visible yet) — retry later;
 * - limit: a limit of this node or its subnet is reached (subnet full, attachment limit) — try elsewhere or
 *   abandon;
 * - account: not this node's fault and not for ever — IAM still propagating after a deploy
 *   (UnauthorizedOperation), an account-wide quota (NetworkInterfaceLimitExceeded), or a code this version does
 *   not know. Retried with back-off and alarmed: abandoning would only make Auto Scaling replace the instance
 *   into the same error, a replace loop;
 * - fatal: the request can never succeed as given (a known bad parameter or configured resource) — abandon.
 */
export type Ec2ErrorKind = 'throttling' | 'unavailable' | 'not-found-yet' | 'limit' | 'account' | 'fatal';

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

/** Limits of one instance or one subnet: another subnet, or another instance, can do better. */
const LIMIT = new Set([
  'InsufficientFreeAddressesInSubnet',
  'InsufficientCidrBlocks',
  'AttachmentLimitExceeded',
  'PrivateIpAddressLimitExceeded',
]);

/** Codes whose cause is the account or the deployment's rights, which time or an operator fixes. */
const ACCOUNT = new Set([
  'UnauthorizedOperation',
  'AuthFailure',
  'Blocked',
  'OptInRequired',
  'PendingVerification',
  'NetworkInterfaceLimitExceeded',
  'AddressLimitExceeded',
  'ResourceLimitExceeded',
]);

/**
 * Requests that can never succeed as sent: a malformed or conflicting parameter, or a configured subnet or
 * security group that does not exist. Only these abandon a launch; every code not listed anywhere is `account`.
 */
const FATAL = new Set([
  'InvalidParameter',
  'InvalidParameterValue',
  'InvalidParameterCombination',
  'MissingParameter',
  'UnknownParameter',
  'InvalidSubnetID.NotFound',
  'InvalidSubnetID.Malformed',
  'InvalidGroup.NotFound',
  'InvalidGroupId.Malformed',
  'InvalidSecurityGroupID.NotFound',
  'InvalidNetworkInterfaceID.Malformed',
  'InvalidInstanceID.Malformed',
  'InvalidNetworkInterface.InUse',
  'IdempotentParameterMismatch',
  'UnsupportedOperation',
  'InvalidID',
]);

export function classifyEc2Code(code: string, httpStatus?: number): Ec2ErrorKind {
  if (THROTTLING.has(code)) return 'throttling';
  if (UNAVAILABLE.has(code)) return 'unavailable';
  if (NOT_FOUND_YET.has(code)) return 'not-found-yet';
  if (LIMIT.has(code)) return 'limit';
  if (FATAL.has(code)) return 'fatal';
  if (ACCOUNT.has(code)) return 'account';
  if (httpStatus !== undefined && httpStatus >= 500) return 'unavailable';
  return 'account';
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
    return (
      this.kind === 'throttling' ||
      this.kind === 'unavailable' ||
      this.kind === 'not-found-yet' ||
      this.kind === 'account'
    );
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
  const kind =
    (classified === 'fatal' || classified === 'account') && status === undefined ? 'unavailable' : classified;
  return new Ec2ApiError(action, code, kind, `failed to call EC2 ${action}: ${code}: ${errorMessage(err)}`, {
    cause: err,
  });
}

export function isEc2Error(err: unknown, ...kinds: Ec2ErrorKind[]): err is Ec2ApiError {
  return err instanceof Ec2ApiError && (kinds.length === 0 || kinds.includes(err.kind));
}
