import type { Clock } from '../clock.js';
import type { ControlPlaneConfig } from '../config/control-plane.js';
import type { Ec2Port } from '../ec2/port.js';
import type { LeaseStore } from '../lease-store/port.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import type { SweepCursorStore } from '../schedule/cursor.js';
import { sleepMs } from '../sleep.js';

export interface PoolDeps {
  readonly ec2: Ec2Port;
  readonly store: LeaseStore;
  readonly config: ControlPlaneConfig;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly metrics?: Metrics;
  /**
   * A RELEASING lease older than this is an interrupted handshake (its invocation crashed or timed out) and
   * is finished by whoever finds it. Must exceed the pool-manager's Lambda timeout (60 s), so a handshake
   * still in flight is never finished — or worse, reverted — twice. Default 120 s.
   */
  readonly resumeReleasingAfterMs?: number;
  /** How long a top-up waits inline for a new ENI's attachment before leaving it to the next run. Default 10 s. */
  readonly attachWaitMs?: number;
  /** How long a pass's assignment marker holds its node if the pass dies. Default 90 s (pool-manager.ts). */
  readonly passMarkerTtlMs?: number;
  /** How long a top-up plans around a subnet EC2 refused for room. Default 10 min (subnet-holds.ts). */
  readonly subnetRefusalHoldMs?: number;
  /** Where the scheduled sweep stands between runs; absent: every scheduled run passes every READY node. */
  readonly sweepCursor?: SweepCursorStore;
  /** How often the paced sweep starts a new cycle over every node. Default 1 h (sweep.ts). */
  readonly sweepCycleMs?: number;
  /** Every how many cycles the sweep passes every READY node in full. Default never: the census lists due nodes. */
  readonly fullPassEveryCycles?: number;
  /** Sleep between attachment polls (tests pass a fast one). */
  readonly sleep?: (ms: number) => Promise<void>;
}

export const DEFAULT_RESUME_RELEASING_AFTER_MS = 120_000;
export const DEFAULT_ATTACH_WAIT_MS = 10_000;

export function sleepOf(deps: PoolDeps): (ms: number) => Promise<void> {
  return deps.sleep ?? sleepMs;
}
