/** Time is injected everywhere so cooldowns, release delays and timeouts are testable without sleeping. */
export interface Clock {
  nowMs(): number;
}

export const systemClock: Clock = { nowMs: () => Date.now() };

/** A clock tests move by hand. */
export class ManualClock implements Clock {
  constructor(private currentMs = Date.UTC(2026, 0, 1)) {}
  nowMs(): number {
    return this.currentMs;
  }
  advance(byMs: number): void {
    if (byMs < 0) throw new RangeError('a clock does not go backwards');
    this.currentMs += byMs;
  }
  set(toMs: number): void {
    this.currentMs = toMs;
  }
}
