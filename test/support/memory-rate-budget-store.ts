import { type BucketRate, tatAfter, tokenStartMs } from '../../shared/ec2/gcra.js';
import type { RateBudgetStore, TakeResult } from '../../shared/ec2/rate-budget-store.js';

/** The rate budget's store in one process: the same arithmetic as the DynamoDB store. */
export class MemoryRateBudgetStore implements RateBudgetStore {
  private readonly tats = new Map<string, number>();
  /** Takes served, for tests that count store round trips. */
  takes = 0;

  async take(key: string, count: number, rate: BucketRate, nowMs: number, latestStartMs: number): Promise<TakeResult> {
    this.takes += 1;
    const tat = this.tats.get(key);
    const base = Math.max(tat ?? nowMs, nowMs);
    if (tokenStartMs(rate, base, count, nowMs) > latestStartMs) return { kind: 'short', tatMs: base };
    this.tats.set(key, tatAfter(rate, tat, count, nowMs));
    return { kind: 'granted', baseMs: base };
  }
}
