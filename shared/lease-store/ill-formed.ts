import { ValidationError } from '../errors.js';
import { A, type Item } from './item-codec.js';

/** Told about each item a listing skips because it does not decode. */
export type IllFormedHandler = (key: { pk?: string; sk?: string }, error: unknown) => void;

/**
 * Decodes what decodes and reports the rest: a node can create items in its own partition, and one malformed
 * item must not stop the control plane's pass over every node.
 */
export function decodeEach<T>(items: readonly Item[], decode: (item: Item) => T, onIllFormed: IllFormedHandler): T[] {
  const out: T[] = [];
  for (const item of items) {
    try {
      out.push(decode(item));
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      onIllFormed({ pk: item[A.pk]?.S, sk: item[A.sk]?.S }, err);
    }
  }
  return out;
}
