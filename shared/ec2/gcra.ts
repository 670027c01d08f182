/**
 * The arithmetic of the EC2 rate budget (rate-budget.ts): GCRA over one stored time per bucket. The shared
 * state per bucket is one number, the "theoretical arrival time" `tatMs` (when the bucket would be full again if
 * nobody took more): taking n tokens moves it to max(tat, now) + n·interval, and the k-th of them may be sent
 * once the bucket holds it, at max(now, tat_k − capacity·interval). A reservation is therefore one atomic add on
 * the stored time, so concurrent takers never read-modify-write each other.
 */
export interface BucketRate {
  /** Tokens the bucket holds when full. */
  readonly bucket: number;
  readonly refillPerSecond: number;
  /**
   * Tokens of EC2's bucket the budget does not hand out (ec2BucketRates): so many refill intervals late a held
   * ticket may still be used without overdrawing EC2's bucket. Absent: the budget's `ticketGraceTokens`.
   */
  readonly heldBackTokens?: number;
}

export function intervalMs(rate: BucketRate): number {
  return 1000 / rate.refillPerSecond;
}

/** When the k-th (1-based) of the tokens taken after `baseMs` may be sent. */
export function tokenStartMs(rate: BucketRate, baseMs: number, k: number, nowMs: number): number {
  const step = intervalMs(rate);
  return Math.max(nowMs, baseMs + k * step - rate.bucket * step);
}

/** How many tokens fit before `latestStartMs` given the stored time `tatMs` (0 when none does). */
export function tokensThatFit(rate: BucketRate, tatMs: number, nowMs: number, latestStartMs: number): number {
  const step = intervalMs(rate);
  const base = Math.max(tatMs, nowMs);
  return Math.max(0, Math.floor((latestStartMs - base) / step + rate.bucket));
}

/** The stored time after a take: the shared arithmetic of every store. */
export function tatAfter(rate: BucketRate, tatMs: number | undefined, count: number, nowMs: number): number {
  return Math.max(tatMs ?? nowMs, nowMs) + count * intervalMs(rate);
}
