import type { Clock } from '../../shared/clock.js';
import { systemClock } from '../../shared/clock.js';

/**
 * Simulated durations on real timers. `timeScale` is real milliseconds per simulated millisecond: 1 is real
 * time, 0.01 makes a 300 s lifecycle-hook timeout fire after 3 s, 0 makes every delay immediate (the EC2
 * simulator's Timeline uses the same convention, so one `timeScale` drives the whole local cloud). Timestamps (SentTimestamp, event `time`)
 * come from the clock unscaled, so they stay comparable with the caller's own clock.
 *
 * Every pending timer is tracked so `close()` leaves no handle open (vitest and `npm run local` exit cleanly).
 */
export interface SimScheduler {
  readonly timeScale: number;
  readonly clock: Clock;
  /** Real milliseconds a simulated duration of `simMs` takes. */
  realMs(simMs: number): number;
  /** Runs `fn` after a simulated delay; returns a cancel function. */
  after(simMs: number, fn: () => void): () => void;
  /** Resolves after a simulated delay, or early (false) when the signal aborts. */
  sleep(simMs: number, signal?: AbortSignal): Promise<boolean>;
  close(): void;
}

export function createScheduler(options: { timeScale?: number; clock?: Clock } = {}): SimScheduler {
  const timeScale = options.timeScale ?? 1;
  if (!(timeScale >= 0) || !Number.isFinite(timeScale))
    throw new RangeError(`timeScale must be >= 0, got ${timeScale}`);
  const clock = options.clock ?? systemClock;
  const timers = new Set<NodeJS.Timeout>();
  // Pending sleeps resolve (false) on close instead of hanging their awaiters forever.
  const sleepers = new Set<() => void>();
  let closed = false;
  const realMs = (simMs: number): number => Math.max(0, Math.round(simMs * timeScale));
  const after = (simMs: number, fn: () => void): (() => void) => {
    if (closed) return () => {};
    const timer = setTimeout(() => {
      timers.delete(timer);
      fn();
    }, realMs(simMs));
    timers.add(timer);
    return () => {
      clearTimeout(timer);
      timers.delete(timer);
    };
  };
  return {
    timeScale,
    clock,
    realMs,
    after,
    sleep: (simMs, signal) =>
      new Promise<boolean>((resolve) => {
        if (signal?.aborted || closed) return resolve(false);
        const onAbort = (): void => {
          cancel();
          sleepers.delete(onAbort);
          resolve(false);
        };
        const cancel = after(simMs, () => {
          signal?.removeEventListener('abort', onAbort);
          sleepers.delete(onAbort);
          resolve(true);
        });
        sleepers.add(onAbort);
        signal?.addEventListener('abort', onAbort, { once: true });
      }),
    close: () => {
      closed = true;
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      for (const wake of [...sleepers]) wake();
    },
  };
}
