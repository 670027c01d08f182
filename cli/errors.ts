import { VpcLeaseError } from '../shared/errors.js';

/**
 * Exit codes: 0 fine; 1 the answer is "no" (audit found drift, a lease or node that does not exist); 2 the
 * command line is wrong; 3 AWS (or the local cloud) could not be used — table, credentials, permissions,
 * region, endpoint.
 */
export const EXIT = { ok: 0, negative: 1, usage: 2, environment: 3 } as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

export class CliError extends VpcLeaseError {
  constructor(
    message: string,
    readonly exitCode: ExitCode,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export class UsageError extends CliError {
  constructor(message: string) {
    super(message, EXIT.usage);
  }
}

export interface AwsErrorContext {
  readonly region: string | undefined;
  readonly tableName: string;
  /** Set when the command runs against the local cloud. */
  readonly local: boolean;
}

const CREDENTIALS_MISSING = new Set(['CredentialsProviderError', 'ProviderError']);
const CREDENTIALS_REJECTED = new Set([
  'UnrecognizedClientException',
  'InvalidClientTokenId',
  'InvalidAccessKeyId',
  'AuthFailure',
  'ExpiredToken',
  'ExpiredTokenException',
  'SignatureDoesNotMatch',
  'InvalidSignatureException',
  'IncompleteSignature',
]);
const DENIED = new Set([
  'AccessDeniedException',
  'AccessDenied',
  'UnauthorizedOperation',
  'AuthorizationError',
  'AccessDeniedException.Unknown',
]);
const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'ECONNRESET', 'EHOSTUNREACH']);

/** The error and its causes, outermost first (the lease store wraps the SDK's errors). */
function chain(err: unknown): Error[] {
  const out: Error[] = [];
  let e: unknown = err;
  while (e instanceof Error && out.length < 8) {
    out.push(e);
    e = e.cause;
  }
  return out;
}

/**
 * Turns what the AWS SDK throws into a message an operator can act on. The SDK names its exceptions after the
 * service's error codes (`name`), so the mapping is by name; socket failures carry a Node `code`.
 */
export function explainAwsError(err: unknown, ctx: AwsErrorContext): CliError | undefined {
  for (const e of chain(err)) {
    const name = e.name;
    const code = (e as { code?: unknown }).code;
    const where = ctx.local ? 'the local cloud' : `region ${ctx.region ?? '(unset)'}`;
    // DynamoDB is the only service the CLI calls that answers ResourceNotFoundException (SQS says
    // QueueDoesNotExist, EC2 *.NotFound), and the CLI only names one table.
    if (name === 'ResourceNotFoundException')
      return new CliError(
        `table ${ctx.tableName} not found in ${where}: give the stack's lease table with --table (the stack output TableName) and the right --region`,
        EXIT.environment,
        { cause: err },
      );
    if (name === 'AWS.SimpleQueueService.NonExistentQueue' || name === 'QueueDoesNotExist')
      return new CliError(`not found in ${where}: ${e.message}`, EXIT.environment, { cause: err });
    if (CREDENTIALS_MISSING.has(name) || /Could not load credentials/i.test(e.message))
      return new CliError(
        'no AWS credentials found: configure the standard chain (AWS_PROFILE, `aws configure`, SSO, or an instance role), or use --local',
        EXIT.environment,
        { cause: err },
      );
    if (CREDENTIALS_REJECTED.has(name))
      return new CliError(`AWS rejected the credentials (${name}): ${e.message}`, EXIT.environment, { cause: err });
    if (DENIED.has(name))
      return new CliError(
        `permission denied (${name}): ${e.message} — the operator role needs read access to the table and ec2:Describe*`,
        EXIT.environment,
        { cause: err },
      );
    if (/Region is missing/i.test(e.message))
      return new CliError('no region: pass --region, set AWS_REGION, or use --local', EXIT.environment, {
        cause: err,
      });
    if (typeof code === 'string' && UNREACHABLE.has(code))
      return new CliError(
        ctx.local
          ? `the local cloud does not answer (${code}): is it still running? \`vpc-lease local up\` starts one`
          : `cannot reach AWS (${code}): ${e.message}`,
        EXIT.environment,
        { cause: err },
      );
  }
  return undefined;
}
