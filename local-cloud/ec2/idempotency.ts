import { Ec2ApiError } from './errors.js';

/**
 * ClientToken idempotency, per action and token: the same token with the same parameters answers the first
 * result again (no second resource); with different parameters it is `IdempotentParameterMismatch`. A request
 * that failed records nothing, so a retry after an error really runs again, as in EC2.
 */
export class ClientTokens {
  private readonly seen = new Map<string, { fingerprint: string; output: Record<string, unknown> }>();

  run(action: string, input: Record<string, unknown>, work: () => Record<string, unknown>): Record<string, unknown> {
    const token = input['ClientToken'];
    if (typeof token !== 'string' || token === '') return work();
    if (token.length > 64) {
      throw new Ec2ApiError('InvalidParameterValue', `Value (${token}) for parameter clientToken is invalid.`);
    }
    const key = `${action}\u0000${token}`;
    const fingerprint = canonical(input);
    const previous = this.seen.get(key);
    if (previous) {
      if (previous.fingerprint !== fingerprint) {
        throw new Ec2ApiError(
          'IdempotentParameterMismatch',
          `The client token you have provided is associated with a resource that is already created, but with different parameters.`,
        );
      }
      return previous.output;
    }
    const output = work();
    this.seen.set(key, { fingerprint, output });
    return output;
  }
}

function canonical(input: Record<string, unknown>): string {
  const strip = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(strip);
    if (value instanceof Date) return value.toISOString();
    if (value && typeof value === 'object') {
      return Object.fromEntries(
        Object.entries(value)
          .filter(([k, v]) => k !== 'ClientToken' && k !== 'DryRun' && v !== undefined)
          .sort(([a], [b]) => a.localeCompare(b))
          .map(([k, v]) => [k, strip(v)]),
      );
    }
    return value;
  };
  return JSON.stringify(strip(input));
}
