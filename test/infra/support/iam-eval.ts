/**
 * A small, strict evaluator of IAM identity-policy statements, enough to prove what a synthesised policy allows:
 * Allow/Deny, Action/Resource globs, policy variables, and the condition operators our policies use. Anything
 * it does not understand (NotAction, an unknown operator) throws, so a policy change cannot slip past it.
 */

export interface PolicyStatementJson {
  readonly Sid?: string;
  readonly Effect: 'Allow' | 'Deny';
  readonly Action?: string | readonly string[];
  readonly Resource?: string | readonly string[];
  readonly Condition?: Readonly<Record<string, Readonly<Record<string, string | readonly string[]>>>>;
  readonly NotAction?: unknown;
  readonly NotResource?: unknown;
  readonly Principal?: unknown;
}

export interface PolicyJson {
  readonly Statement: readonly PolicyStatementJson[];
}

export interface Request {
  readonly action: string;
  readonly resource: string;
  /** Request context keys; multi-valued keys (dynamodb:LeadingKeys, aws:TagKeys) as arrays. */
  readonly context: Readonly<Record<string, string | readonly string[] | undefined>>;
}

const list = <T>(v: T | readonly T[] | undefined): readonly T[] =>
  v === undefined ? [] : Array.isArray(v) ? (v as readonly T[]) : [v as T];

function glob(pattern: string, value: string, ignoreCase: boolean): boolean {
  const re = pattern
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${re}$`, ignoreCase ? 'i' : '').test(value);
}

/** Replaces `${key}` policy variables with the request's values; an absent key makes the value unmatchable. */
function substitute(value: string, context: Request['context']): string | undefined {
  let missing = false;
  const out = value.replace(/\$\{([^}]+)\}/g, (_, key: string) => {
    const v = context[key];
    if (typeof v !== 'string') {
      missing = true;
      return '';
    }
    return v;
  });
  return missing ? undefined : out;
}

function conditionHolds(operator: string, key: string, wanted: readonly string[], request: Request): boolean {
  const actual = request.context[key];
  const values = wanted.map((w) => substitute(w, request.context)).filter((w): w is string => w !== undefined);
  switch (operator) {
    case 'StringEquals':
      return typeof actual === 'string' && values.includes(actual);
    case 'StringEqualsIfExists':
      return actual === undefined || (typeof actual === 'string' && values.includes(actual));
    case 'StringLike':
      return typeof actual === 'string' && values.some((v) => glob(v, actual, false));
    case 'ArnEquals':
    case 'ArnLike':
      return typeof actual === 'string' && values.some((v) => glob(v, actual, false));
    case 'ForAllValues:StringEquals':
      // True for an absent or empty key: the reason policies pair it with a Null check.
      return list(actual).every((a) => values.includes(a));
    case 'ForAllValues:StringNotEquals':
      return list(actual).every((a) => !values.includes(a));
    case 'ForAnyValue:StringEquals':
      return list(actual).some((a) => values.includes(a));
    case 'Null': {
      const absent = actual === undefined || (Array.isArray(actual) && actual.length === 0);
      return wanted.every((w) => (w === 'true' ? absent : !absent));
    }
    default:
      throw new Error(`iam-eval: unsupported condition operator ${operator}`);
  }
}

function statementApplies(s: PolicyStatementJson, request: Request): boolean {
  if (s.NotAction !== undefined || s.NotResource !== undefined || s.Principal !== undefined)
    throw new Error(`iam-eval: statement ${s.Sid ?? ''} uses NotAction/NotResource/Principal`);
  if (!list(s.Action).some((a) => glob(a, request.action, true))) return false;
  const resources = list(s.Resource)
    .map((r) => substitute(r, request.context))
    .filter((r): r is string => r !== undefined);
  if (!resources.some((r) => glob(r, request.resource, false))) return false;
  for (const [operator, clauses] of Object.entries(s.Condition ?? {})) {
    for (const [key, wanted] of Object.entries(clauses)) {
      if (!conditionHolds(operator, key, list(wanted), request)) return false;
    }
  }
  return true;
}

/** IAM's identity-policy logic: an explicit Deny wins, else any Allow allows, else implicit deny. */
export function isAllowed(policy: PolicyJson, request: Request): boolean {
  let allowed = false;
  for (const s of policy.Statement) {
    if (!statementApplies(s, request)) continue;
    if (s.Effect === 'Deny') return false;
    allowed = true;
  }
  return allowed;
}

/**
 * Turns CloudFormation intrinsics into concrete strings: `{Ref: X}` and `{Fn::GetAtt: [X, A]}` through the
 * given map (keys `X` and `X.A`), and Fn::Join. An unknown reference throws.
 */
export function concretize(value: unknown, refs: Readonly<Record<string, string>>): unknown {
  if (Array.isArray(value)) return value.map((v) => concretize(v, refs));
  if (typeof value !== 'object' || value === null) return value;
  const o = value as Record<string, unknown>;
  if (typeof o.Ref === 'string') {
    const v = refs[o.Ref];
    if (v === undefined) throw new Error(`concretize: no value for Ref ${o.Ref}`);
    return v;
  }
  if (Array.isArray(o['Fn::GetAtt'])) {
    const [id, attr] = o['Fn::GetAtt'] as [string, string];
    const v = refs[`${id}.${attr}`];
    if (v === undefined) throw new Error(`concretize: no value for GetAtt ${id}.${attr}`);
    return v;
  }
  if (Array.isArray(o['Fn::Join'])) {
    const [sep, items] = o['Fn::Join'] as [string, unknown[]];
    return items.map((i) => concretize(i, refs)).join(sep);
  }
  return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, concretize(v, refs)]));
}
