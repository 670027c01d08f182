/**
 * A counting semaphore: caps concurrent mutating EC2 calls per container, so one batch of launches cannot
 * drain the account's token buckets on its own (EC2 buckets are per account and Region, shared with every
 * other caller) and the SDK's adaptive retry sees a steady rate instead of bursts.
 */
export class Semaphore {
  private active = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`semaphore limit must be ≥ 1, got ${limit}`);
  }

  get inUse(): number {
    return this.active;
  }

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.active += 1;
    try {
      return await task();
    } finally {
      const next = this.waiting.shift();
      // Hand the slot straight to the next waiter, so `active` never dips and a newcomer cannot jump the queue.
      if (next) next();
      else this.active -= 1;
    }
  }
}
