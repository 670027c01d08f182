import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { ValidationError } from '../errors.js';

/**
 * Plain JSON values ⇄ DynamoDB AttributeValues, for the node item's nested parts (ENIs, limits, lifecycle) —
 * stored as maps and lists rather than a JSON string so an operator can read them in the console and a stream
 * filter can match on them. @aws-sdk/util-dynamodb does this too, but is not a dependency (and the CNI must
 * not load it).
 */
export type Plain = string | number | boolean | null | readonly Plain[] | { readonly [key: string]: Plain | undefined };

/** A string and a number attribute (a number travels as its decimal text). */
export const str = (value: string): { S: string } => ({ S: value });
export const num = (value: number): { N: string } => ({ N: String(value) });

export function toAttr(value: Plain): AttributeValue {
  if (value === null) return { NULL: true };
  if (typeof value === 'string') return { S: value };
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new ValidationError(`cannot store the number ${value}`);
    return { N: String(value) };
  }
  if (typeof value === 'boolean') return { BOOL: value };
  if (Array.isArray(value)) return { L: (value as readonly Plain[]).map(toAttr) };
  const map: Record<string, AttributeValue> = {};
  for (const [k, v] of Object.entries(value as Record<string, Plain | undefined>)) {
    if (v !== undefined) setOwn(map, k, toAttr(v));
  }
  return { M: map };
}

export function fromAttr(attr: AttributeValue): Plain {
  if (attr.S !== undefined) return attr.S;
  if (attr.N !== undefined) return Number(attr.N);
  if (attr.BOOL !== undefined) return attr.BOOL;
  if (attr.NULL !== undefined) return null;
  if (attr.L !== undefined) return attr.L.map(fromAttr);
  if (attr.M !== undefined) {
    const out: Record<string, Plain> = {};
    for (const [k, v] of Object.entries(attr.M)) setOwn(out, k, fromAttr(v));
    return out;
  }
  throw new ValidationError(`unsupported attribute value ${JSON.stringify(Object.keys(attr))}`);
}

/** `obj[key] = value` would treat a key named `__proto__` as the prototype, silently dropping it. */
function setOwn<T>(obj: Record<string, T>, key: string, value: T): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}
