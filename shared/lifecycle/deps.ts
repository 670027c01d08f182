import type { AutoScalingPort } from '../autoscaling/port.js';
import type { Clock } from '../clock.js';
import type { ControlPlaneConfig } from '../config/control-plane.js';
import type { Ec2Port } from '../ec2/port.js';
import type { LeaseStore } from '../lease-store/port.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import type { Requeue } from '../queue/requeue.js';

/** How long to wait before a re-enqueued event comes back, and when to stop trying. */
export interface RetryPolicy {
  /**
   * Seconds of re-enqueue delay one event may spend waiting before a launch is abandoned ("never left to time
   * out silently"). A budget of queue time, not of attempts or wall-clock time: a busy Lambda or a slow machine
   * makes fewer attempts in the same queue time, never more, so it cannot exhaust the budget early.
   */
  readonly maxWaitS: number;
  /** An attachment in progress: EC2 takes a few seconds. */
  readonly attachingDelayS: number;
  /** Throttled or unavailable past the SDK's retries: base of an exponential back-off, capped. */
  readonly backoffBaseS: number;
  readonly backoffMaxS: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  maxWaitS: 600,
  attachingDelayS: 1,
  backoffBaseS: 2,
  backoffMaxS: 60,
};

export interface LifecycleDeps {
  readonly ec2: Ec2Port;
  readonly autoScaling: AutoScalingPort;
  readonly store: LeaseStore;
  readonly requeue: Requeue;
  readonly config: ControlPlaneConfig;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly metrics?: Metrics;
  readonly retry?: RetryPolicy;
  /**
   * Real ms a launch waits inside the invocation for attachments it just started, then looks once more before
   * re-enqueuing (default 0: re-enqueue at once). A re-enqueued launch queues behind every newer event, so
   * at scale this short wait finishes launches in one invocation, in arrival order.
   */
  readonly attachWaitMs?: number;
  /** Jitter source in [0, 1) (tests pin it). */
  readonly random?: () => number;
}

/** What an executor reports back to the record handler. */
export type StepOutcome =
  | { readonly kind: 'done'; readonly summary: string }
  | {
      readonly kind: 'wait';
      readonly reason: string;
      /** 'attaching' waits a fixed short delay; 'backoff' grows with the attempt number. */
      readonly delay: 'attaching' | 'backoff';
      /**
       * 'account': blocked by something that is not the node's fault (ec2/errors.ts); the wait is not charged
       * to the retry budget, so it never ends in ABANDON — the hook's own lifetime bounds it.
       */
      readonly cause?: 'account';
      /** Seconds to wait instead of the delay's own (the EC2 rate budget knows when its next token is). */
      readonly afterS?: number;
      /** Seconds past `afterS` the work may still come back and spend the EC2 ticket it holds. */
      readonly lateOkS?: number;
    };

/** A `wait` outcome: come back later; what was done is recorded. */
export type WaitOutcome = Extract<StepOutcome, { kind: 'wait' }>;

export const done = (summary: string): StepOutcome => ({ kind: 'done', summary });
export const wait = (reason: string, delay: 'attaching' | 'backoff' = 'backoff', cause?: 'account'): WaitOutcome => ({
  kind: 'wait',
  reason,
  delay,
  ...(cause ? { cause } : {}),
});
