import type { BucketRate } from './gcra.js';

export type TakeResult =
  /** `count` tokens are reserved; the stored time before them was `baseMs` (≥ the request's now). */
  | { readonly kind: 'granted'; readonly baseMs: number }
  /** The last token would start later than allowed; nothing was taken. `tatMs` is the stored time seen. */
  | { readonly kind: 'short'; readonly tatMs: number };

/** Where the budget's bucket times live: the lease table for the Lambdas (tests keep them in memory). */
export interface RateBudgetStore {
  /**
   * Takes `count` tokens of bucket `key` at `nowMs`, unless the last of them would start after
   * `latestStartMs` (then nothing is taken).
   */
  take(key: string, count: number, rate: BucketRate, nowMs: number, latestStartMs: number): Promise<TakeResult>;
}
