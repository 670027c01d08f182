/**
 * Simulated time: every modelled duration is given in AWS seconds/milliseconds and multiplied by `timeScale`
 * to get real milliseconds (0.01 turns a 5 s attach into 50 ms; 0 makes everything immediate). Delayed work is
 * tracked so `close()` leaves no timers behind.
 */
export class Timeline {
  private readonly timers = new Set<NodeJS.Timeout>();
  private closed = false;

  constructor(
    public timeScale: number,
    private readonly realNowMs: () => number = Date.now,
  ) {}

  /** Real milliseconds since the epoch; every deadline the simulator keeps is in this unit. */
  nowMs(): number {
    return this.realNowMs();
  }

  /** Real milliseconds that `simMs` of AWS time takes now. */
  realMs(simMs: number): number {
    return Math.max(0, simMs * this.timeScale);
  }

  after(simMs: number, work: () => void): void {
    if (this.closed) return;
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (!this.closed) work();
    }, this.realMs(simMs));
    this.timers.add(timer);
  }

  close(): void {
    this.closed = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
  }
}
