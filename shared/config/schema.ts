import { ValidationError } from '../errors.js';

/**
 * A tiny declarative validator: every field has a kind, a default and a one-line description; `validate`
 * reports every problem at once, each naming the field and why, so an operator fixes a config in one pass.
 */
export type FieldSpec =
  | { kind: 'string'; default: string; pattern?: RegExp; patternHint?: string; doc: string }
  | { kind: 'optionalString'; pattern?: RegExp; patternHint?: string; doc: string }
  | { kind: 'int'; default: number; min: number; max: number; doc: string }
  | { kind: 'bool'; default: boolean; doc: string }
  | { kind: 'enum'; default: string; values: readonly string[]; doc: string }
  | { kind: 'stringList'; default: readonly string[]; itemPattern?: RegExp; itemHint?: string; doc: string }
  | { kind: 'stringMap'; default: Readonly<Record<string, string>>; doc: string };

export type Schema = Record<string, FieldSpec>;

type ValueOf<F extends FieldSpec> = F extends { kind: 'string' }
  ? string
  : F extends { kind: 'optionalString' }
    ? string | undefined
    : F extends { kind: 'int' }
      ? number
      : F extends { kind: 'bool' }
        ? boolean
        : F extends { kind: 'enum'; values: readonly (infer V)[] }
          ? V
          : F extends { kind: 'stringList' }
            ? readonly string[]
            : Readonly<Record<string, string>>;

export type ConfigOf<S extends Schema> = { readonly [K in keyof S]: ValueOf<S[K]> };

export interface ValidateOptions {
  /** What to call the input in messages, e.g. "configuration" or "netconf". */
  readonly subject?: string;
  /** Unknown fields are errors unless listed here (fields owned by someone else, like the CNI's `type`). */
  readonly allowExtra?: readonly string[];
  /** Report unknown fields instead of ignoring them. */
  readonly rejectUnknown?: boolean;
}

export function validate<S extends Schema>(schema: S, input: unknown, options: ValidateOptions = {}): ConfigOf<S> {
  const subject = options.subject ?? 'configuration';
  if (input === null || typeof input !== 'object' || Array.isArray(input)) {
    throw new ValidationError(`invalid ${subject}: expected an object`);
  }
  const raw = input as Record<string, unknown>;
  const problems: string[] = [];
  const out: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(schema)) {
    const value = raw[name];
    const problem = (why: string): void => {
      problems.push(`${name}: ${why}`);
    };
    if (value === undefined || value === null) {
      out[name] = 'default' in spec ? spec.default : undefined;
      continue;
    }
    switch (spec.kind) {
      case 'string':
      case 'optionalString':
        if (typeof value !== 'string' || value.length === 0) problem('must be a non-empty string');
        else if (spec.pattern && !spec.pattern.test(value))
          problem(`${JSON.stringify(value)} is not ${spec.patternHint ?? `of the form ${spec.pattern}`}`);
        else out[name] = value;
        break;
      case 'int':
        if (typeof value !== 'number' || !Number.isInteger(value))
          problem(`must be an integer, got ${JSON.stringify(value)}`);
        else if (value < spec.min || value > spec.max)
          problem(`must be between ${spec.min} and ${spec.max}, got ${value}`);
        else out[name] = value;
        break;
      case 'bool':
        if (typeof value !== 'boolean') problem(`must be true or false, got ${JSON.stringify(value)}`);
        else out[name] = value;
        break;
      case 'enum':
        if (typeof value !== 'string' || !spec.values.includes(value))
          problem(`must be one of ${spec.values.join(', ')}, got ${JSON.stringify(value)}`);
        else out[name] = value;
        break;
      case 'stringList':
        if (!Array.isArray(value) || value.some((v) => typeof v !== 'string')) problem('must be a list of strings');
        else {
          const bad = spec.itemPattern ? value.filter((v: string) => !spec.itemPattern!.test(v)) : [];
          if (bad.length > 0)
            problem(
              `${bad.map((b) => JSON.stringify(b)).join(', ')} ${bad.length > 1 ? 'are' : 'is'} not ${spec.itemHint ?? 'valid'}`,
            );
          else out[name] = Object.freeze([...value]);
        }
        break;
      case 'stringMap':
        if (
          typeof value !== 'object' ||
          Array.isArray(value) ||
          Object.values(value).some((v) => typeof v !== 'string')
        )
          problem('must be an object of string values');
        else out[name] = Object.freeze({ ...(value as Record<string, string>) });
        break;
    }
  }
  if (options.rejectUnknown) {
    const allowed = new Set([...Object.keys(schema), ...(options.allowExtra ?? [])]);
    for (const name of Object.keys(raw)) if (!allowed.has(name)) problems.push(`${name}: unknown field`);
  }
  if (problems.length > 0) {
    throw new ValidationError(`invalid ${subject}: ${problems.join('; ')}`, problems);
  }
  return Object.freeze(out) as ConfigOf<S>;
}

/** Applies the defaults only; for documentation and for callers that want to see the effective config. */
export function defaults<S extends Schema>(schema: S): ConfigOf<S> {
  return validate(schema, {});
}
