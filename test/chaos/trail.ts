import { mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { LifecycleDeps } from '../../shared/lifecycle/deps.js';
import { createLogger, type Logger } from '../../shared/log.js';

/** Where a failed schedule's trail goes unless `npm run chaos -- --out DIR` (or CHAOS_OUT) says otherwise. */
export const DEFAULT_TRAIL_DIR = '.test-results/chaos';

/** Entries kept per list: a schedule makes a few thousand; a runaway one must not exhaust memory. */
const KEEP = 20_000;

interface TrailCall {
  readonly atMs: number;
  readonly ms: number;
  readonly instanceId: string;
  readonly delivery: number;
  readonly call: string;
  readonly error?: string;
}

function push<T>(list: T[], item: T): void {
  list.push(item);
  if (list.length > KEEP) list.shift();
}

function describeError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const code = (err as { code?: unknown }).code;
  return `${err.name}${typeof code === 'string' ? ` ${code}` : ''}: ${err.message}`;
}

/**
 * Everything a failed chaos schedule needs to be diagnosed from one run, recorded as it happens (ms since the
 * schedule started): its phases, every event EventBridge saw, every call each delivery made through its ports
 * (EC2, lease store, Auto Scaling, queue) with its duration and error, and the lifecycle's own log lines.
 * Written to a file only when the schedule fails.
 */
export class ChaosTrail {
  private readonly t0 = Date.now();
  readonly phases: { readonly phase: string; readonly atMs: number }[] = [];
  readonly events: { readonly atMs: number; readonly event: unknown }[] = [];
  readonly calls: TrailCall[] = [];
  readonly logs: unknown[] = [];

  private now(): number {
    return Date.now() - this.t0;
  }

  phase(name: string): void {
    this.phases.push({ phase: name, atMs: this.now() });
  }

  event(event: unknown): void {
    push(this.events, { atMs: this.now(), event });
  }

  /** The deps one delivery runs with: its ports recorded, its log lines kept (info and up). */
  deps(deps: LifecycleDeps, instanceId: string, delivery: number): LifecycleDeps {
    const logger: Logger = createLogger({
      level: 'info',
      fields: { instanceId, delivery },
      sink: (line) => push(this.logs, { atMs: this.now(), ...(JSON.parse(line) as object) }),
    });
    const rec = <T extends object>(port: T, label: string): T => this.recorded(port, label, instanceId, delivery);
    return {
      ...deps,
      logger,
      ec2: rec(deps.ec2, 'ec2'),
      store: rec(deps.store, 'store'),
      autoScaling: rec(deps.autoScaling, 'autoScaling'),
      requeue: rec(deps.requeue, 'requeue'),
    };
  }

  private recorded<T extends object>(target: T, label: string, instanceId: string, delivery: number): T {
    return new Proxy(target, {
      get: (obj, prop, receiver) => {
        const value = Reflect.get(obj, prop, receiver);
        if (typeof value !== 'function') return value;
        return async (...args: unknown[]) => {
          const atMs = this.now();
          const call = `${label}.${String(prop)}`;
          try {
            const out = await (value as (...a: unknown[]) => Promise<unknown>).apply(obj, args);
            push(this.calls, { atMs, ms: this.now() - atMs, instanceId, delivery, call });
            return out;
          } catch (err) {
            push(this.calls, { atMs, ms: this.now() - atMs, instanceId, delivery, call, error: describeError(err) });
            throw err;
          }
        };
      },
    });
  }

  /** Writes the trail with `facts` (violations, schedule, stats, final state) and returns the file's path. */
  async write(dir: string, seed: number, facts: Record<string, unknown>): Promise<string> {
    const out = resolve(dir);
    await mkdir(out, { recursive: true });
    const file = join(out, `seed-${seed}-${new Date(this.t0).toISOString().replace(/[:.]/g, '')}.json`);
    const body = { seed, ...facts, phases: this.phases, events: this.events, calls: this.calls, logs: this.logs };
    await writeFile(file, `${JSON.stringify(body, null, 1)}\n`);
    return file;
  }
}
