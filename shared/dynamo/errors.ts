/**
 * How DynamoDB failures are classified, shared by the light client (what to retry) and the lease store (what
 * becomes StoreUnavailableError). Both adapters throw errors whose `name` is the DynamoDB error type.
 */

/** Error types DynamoDB returns when it sheds load; worth retrying after a pause. */
const THROTTLING = new Set([
  'ThrottlingException',
  'ProvisionedThroughputExceededException',
  'RequestLimitExceeded',
  'LimitExceededException',
  'TooManyRequestsException',
]);

const SERVER_SIDE = new Set(['InternalServerError', 'InternalFailure', 'ServiceUnavailable', 'TimeoutError']);

/** Node's socket-level failures: the request may or may not have reached DynamoDB. */
const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_SOCKET',
]);

export const CONDITIONAL_CHECK_FAILED = 'ConditionalCheckFailedException';

export function isConditionalCheckFailed(err: unknown): boolean {
  return err instanceof Error && err.name === CONDITIONAL_CHECK_FAILED;
}

export function isThrottling(err: unknown): boolean {
  return err instanceof Error && THROTTLING.has(err.name);
}

/** Throttling, a 5xx, a timeout or a connection failure: the store is (for now) out of reach. */
export function isTransient(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (THROTTLING.has(err.name) || SERVER_SIDE.has(err.name)) return true;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && CONNECTION_CODES.has(code)) return true;
  const status = (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
  if (typeof status === 'number' && status >= 500) return true;
  const statusCode = (err as { statusCode?: unknown }).statusCode;
  if (typeof statusCode === 'number' && statusCode >= 500) return true;
  // The SDK marks what its own retry strategy considered retryable.
  return (err as { $retryable?: unknown }).$retryable !== undefined;
}

/**
 * A DynamoDB error as the light client throws it: `name` is the error type without its
 * `com.amazonaws.dynamodb.v20120810#` prefix, like the SDK's exceptions. A ConditionalCheckFailedException
 * carries `Item` when the request asked for ReturnValuesOnConditionCheckFailure, as the SDK's does.
 */
export class DynamoServiceError extends Error {
  constructor(
    name: string,
    message: string,
    readonly statusCode: number,
    readonly Item?: Record<string, unknown>,
  ) {
    super(message);
    this.name = name;
  }
}
