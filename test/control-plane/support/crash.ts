/**
 * A process crash, modelled faithfully: once the switch trips, every later call through any wrapped port
 * (EC2, lease store, Auto Scaling, queue) throws before doing anything — nothing after the crash point takes
 * effect, exactly as if the Lambda's process had died right after the call that tripped it.
 */
export class SimulatedCrash extends Error {
  constructor(readonly afterCall: string) {
    super(`simulated crash after ${afterCall}`);
    this.name = 'SimulatedCrash';
  }
}

export class CrashSwitch {
  private calls = 0;
  crashed = false;
  /** Calls seen by counted ports, in order (to map crash points to actions). */
  readonly log: string[] = [];

  /** Trip after the `afterCalls`-th counted call succeeds (0 or undefined: never). */
  constructor(private readonly afterCalls?: number) {}

  get counted(): number {
    return this.calls;
  }

  check(): void {
    if (this.crashed) throw new SimulatedCrash('an earlier call');
  }

  tick(name: string): void {
    this.calls += 1;
    this.log.push(name);
    if (this.afterCalls !== undefined && this.calls === this.afterCalls) {
      this.crashed = true;
      throw new SimulatedCrash(name);
    }
  }
}

/** Wraps every method of `target`: calls fail once crashed; calls of a counted port tick the switch. */
export function crashable<T extends object>(target: T, sw: CrashSwitch, counted: boolean, label: string): T {
  return new Proxy(target, {
    get(obj, prop, receiver) {
      const value = Reflect.get(obj, prop, receiver);
      if (typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        sw.check();
        const out = await (value as (...a: unknown[]) => Promise<unknown>).apply(obj, args);
        sw.check();
        if (counted) sw.tick(`${label}.${String(prop)}`);
        return out;
      };
    },
  });
}
