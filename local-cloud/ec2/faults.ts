import { defaultStatus, Ec2ApiError } from './errors.js';
import type { SeededRandom } from './random.js';

export interface FaultSpec {
  /** An action name, or `*` for every action. */
  readonly action: string;
  /** The EC2 error code to answer, e.g. `InternalError`, `RequestLimitExceeded`, `InvalidNetworkInterfaceID.NotFound`. */
  readonly code: string;
  readonly message?: string;
  /** Defaults to the code's real status (400 client errors, 500/503 server errors). */
  readonly statusCode?: number;
  /** Fail the next N matching calls (default 1). Ignored when `probability` is set. */
  readonly count?: number;
  /** Fail each matching call with this probability, drawn from the seeded generator, until cleared. */
  readonly probability?: number;
  /**
   * `before` (default): the call fails without effect. `after`: the call takes effect, then the client gets the
   * error — a lost response, the case ClientToken and idempotent retries exist for.
   */
  readonly phase?: 'before' | 'after';
}

interface ActiveFault {
  readonly spec: FaultSpec;
  remaining: number;
}

/** Injected failures, deterministic under the simulator's seed. */
export class FaultInjector {
  private faults: ActiveFault[] = [];

  constructor(private readonly random: SeededRandom) {}

  add(spec: FaultSpec): void {
    this.faults.push({ spec, remaining: spec.count ?? 1 });
  }

  clear(): void {
    this.faults = [];
  }

  /** The error this call must fail with in the given phase, consuming one use of the fault. */
  draw(action: string, phase: 'before' | 'after'): Ec2ApiError | undefined {
    for (const fault of this.faults) {
      const { spec } = fault;
      if ((spec.phase ?? 'before') !== phase) continue;
      if (spec.action !== '*' && spec.action !== action) continue;
      if (spec.probability !== undefined) {
        if (this.random.next() >= spec.probability) continue;
      } else {
        if (fault.remaining <= 0) continue;
        fault.remaining -= 1;
      }
      this.faults = this.faults.filter((f) => f.spec.probability !== undefined || f.remaining > 0);
      return new Ec2ApiError(
        spec.code,
        spec.message ?? `Injected fault: ${spec.code}`,
        spec.statusCode ?? defaultStatus(spec.code),
      );
    }
    return undefined;
  }

  pending(): FaultSpec[] {
    return this.faults.map((f) => ({ ...f.spec, count: f.remaining }));
  }
}
