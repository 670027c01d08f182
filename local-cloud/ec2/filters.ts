import { Ec2ApiError } from './errors.js';
import type { Tags } from './model.js';

/**
 * EC2 Describe filters: a resource matches when, for every filter, one of its values for the filter's name
 * matches one of the filter's values (`*` and `?` wildcards allowed). `tag:<key>`, `tag-key` and `tag-value`
 * work on every resource; the rest are named per resource type. An unknown filter name is an error, as in EC2,
 * so a typo in a caller's filter fails loudly instead of matching everything.
 */
export interface Filter {
  readonly Name?: string;
  readonly Values?: readonly string[];
}

export type FieldGetter<T> = (item: T) => readonly (string | number | boolean | undefined)[];

function wildcard(pattern: string): RegExp {
  const body = pattern
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${body}$`);
}

export function applyFilters<T>(
  items: readonly T[],
  filters: readonly Filter[] | undefined,
  fields: Readonly<Record<string, FieldGetter<T>>>,
  tagsOf: (item: T) => Tags,
): T[] {
  if (!filters || filters.length === 0) return [...items];
  const tests = filters.map((filter) => {
    const name = filter.Name ?? '';
    const patterns = (filter.Values ?? []).map(wildcard);
    let getter: FieldGetter<T> | undefined;
    if (name.startsWith('tag:')) {
      const key = name.slice(4);
      getter = (item) => {
        const value = tagsOf(item).get(key);
        return value === undefined ? [] : [value];
      };
    } else if (name === 'tag-key') {
      getter = (item) => [...tagsOf(item).keys()];
    } else if (name === 'tag-value') {
      getter = (item) => [...tagsOf(item).values()];
    } else {
      getter = fields[name];
    }
    if (!getter) throw new Ec2ApiError('InvalidParameterValue', `The filter '${name}' is invalid`);
    const get = getter;
    return (item: T): boolean => get(item).some((v) => v !== undefined && patterns.some((p) => p.test(String(v))));
  });
  return items.filter((item) => tests.every((test) => test(item)));
}

export interface Page<T> {
  readonly items: T[];
  readonly nextToken: string | undefined;
}

/**
 * MaxResults/NextToken over a stable order (creation order). The token is opaque to callers; it carries the
 * offset and a fingerprint of the query so a token replayed against a different query is rejected.
 */
export function paginate<T>(
  items: readonly T[],
  maxResults: number | undefined,
  nextToken: string | undefined,
  query: string,
  bounds: { min: number; max: number } = { min: 5, max: 1000 },
): Page<T> {
  let offset = 0;
  if (nextToken !== undefined) {
    const decoded = decodeToken(nextToken);
    if (!decoded || decoded.query !== fingerprint(query)) {
      throw new Ec2ApiError('InvalidPaginationToken', `Invalid pagination token: ${nextToken}`);
    }
    offset = decoded.offset;
  }
  if (maxResults === undefined) return { items: items.slice(offset), nextToken: undefined };
  if (maxResults < bounds.min || maxResults > bounds.max) {
    throw new Ec2ApiError(
      'InvalidParameterValue',
      `Value ( ${maxResults} ) for parameter maxResults is invalid. Parameter must be between ${bounds.min} and ${bounds.max}.`,
    );
  }
  const end = offset + maxResults;
  const page = items.slice(offset, end);
  const more = end < items.length;
  return {
    items: page,
    nextToken: more ? Buffer.from(JSON.stringify({ o: end, q: fingerprint(query) })).toString('base64url') : undefined,
  };
}

function fingerprint(query: string): string {
  let h = 2166136261;
  for (let i = 0; i < query.length; i++) h = Math.imul(h ^ query.charCodeAt(i), 16777619) >>> 0;
  return h.toString(16);
}

function decodeToken(token: string): { offset: number; query: string } | undefined {
  try {
    const parsed = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as { o?: unknown; q?: unknown };
    if (typeof parsed.o !== 'number' || typeof parsed.q !== 'string') return undefined;
    return { offset: parsed.o, query: parsed.q };
  } catch {
    return undefined;
  }
}
