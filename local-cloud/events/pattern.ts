import { ValidationError } from '../../shared/errors.js';

/**
 * The subset of EventBridge event patterns the control plane's rules use: nested objects, arrays as any-of,
 * exact values, and the content filters `prefix`, `suffix`, `anything-but`, `exists` and `equals-ignore-case`.
 * A pattern field matches an event array when any element matches (EventBridge's rule for array values).
 */
export type EventPattern = { readonly [field: string]: EventPattern | readonly PatternValue[] };
export type PatternValue = string | number | boolean | null | ContentFilter;
export type ContentFilter =
  | { readonly prefix: string }
  | { readonly suffix: string }
  | { readonly 'anything-but': string | number | readonly (string | number)[] | { readonly prefix: string } }
  | { readonly exists: boolean }
  | { readonly 'equals-ignore-case': string };

export class InvalidEventPatternError extends ValidationError {}

/** Throws InvalidEventPatternError as PutRule does: leaves must be arrays, objects must not be empty. */
export function validateEventPattern(pattern: unknown, path = ''): asserts pattern is EventPattern {
  if (typeof pattern !== 'object' || pattern === null || Array.isArray(pattern)) {
    throw new InvalidEventPatternError(`event pattern ${path || '(root)'} must be an object`);
  }
  const entries = Object.entries(pattern);
  if (entries.length === 0) throw new InvalidEventPatternError(`event pattern ${path || '(root)'} is empty`);
  for (const [key, value] of entries) {
    const at = path ? `${path}.${key}` : key;
    if (Array.isArray(value)) {
      if (value.length === 0) throw new InvalidEventPatternError(`event pattern ${at} is an empty array`);
      for (const item of value) {
        if (typeof item === 'object' && item !== null && Object.keys(item).length !== 1) {
          throw new InvalidEventPatternError(`event pattern ${at} has a filter with other than one key`);
        }
      }
    } else {
      validateEventPattern(value, at);
    }
  }
}

function matchesFilter(filter: ContentFilter, value: unknown, present: boolean): boolean {
  if ('exists' in filter) return filter.exists === present;
  if (!present) return false;
  if ('prefix' in filter) return typeof value === 'string' && value.startsWith(filter.prefix);
  if ('suffix' in filter) return typeof value === 'string' && value.endsWith(filter.suffix);
  if ('equals-ignore-case' in filter) {
    return typeof value === 'string' && value.toLowerCase() === filter['equals-ignore-case'].toLowerCase();
  }
  const but = filter['anything-but'];
  if (typeof but === 'object' && !Array.isArray(but)) {
    return typeof value === 'string' && !value.startsWith((but as { prefix: string }).prefix);
  }
  const excluded = Array.isArray(but) ? but : [but];
  return !excluded.includes(value as string | number);
}

function matchesLeaf(allowed: readonly PatternValue[], value: unknown, present: boolean): boolean {
  const candidates = Array.isArray(value) ? value : [value];
  return allowed.some((item) => {
    if (typeof item === 'object' && item !== null) {
      if ('exists' in item) return matchesFilter(item, value, present);
      return present && candidates.some((candidate) => matchesFilter(item, candidate, true));
    }
    return present && candidates.some((candidate) => candidate === item);
  });
}

export function matchesPattern(pattern: EventPattern, event: unknown): boolean {
  const record = typeof event === 'object' && event !== null ? (event as Record<string, unknown>) : {};
  return Object.entries(pattern).every(([key, expected]) => {
    const present = Object.hasOwn(record, key) && record[key] !== undefined;
    const value = record[key];
    if (Array.isArray(expected)) return matchesLeaf(expected as readonly PatternValue[], value, present);
    return present && matchesPattern(expected as EventPattern, value);
  });
}
