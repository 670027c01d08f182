import type {
  AutoScalingPort,
  LifecycleActionRef,
  LifecycleCallOutcome,
  LifecycleResult,
} from '../../../shared/autoscaling/port.js';

export interface CompletedAction {
  readonly ref: LifecycleActionRef;
  readonly result: LifecycleResult;
}

/**
 * A faithful stand-in for Auto Scaling's lifecycle calls, for the tests that drive the record handler
 * directly: an action can be completed once (later calls with its token answer `gone`, as AWS's
 * "No active Lifecycle Action found" does), heartbeats on a completed action are `gone` too.
 */
export class RecordingAutoScaling implements AutoScalingPort {
  readonly completed: CompletedAction[] = [];
  readonly heartbeats: LifecycleActionRef[] = [];
  /** Calls answered `gone` (duplicates). */
  goneCalls = 0;

  async completeLifecycleAction(ref: LifecycleActionRef, result: LifecycleResult): Promise<LifecycleCallOutcome> {
    if (this.completed.some((c) => c.ref.token === ref.token)) {
      this.goneCalls += 1;
      return 'gone';
    }
    this.completed.push({ ref, result });
    return 'done';
  }

  async recordLifecycleActionHeartbeat(ref: LifecycleActionRef): Promise<LifecycleCallOutcome> {
    if (this.completed.some((c) => c.ref.token === ref.token)) {
      this.goneCalls += 1;
      return 'gone';
    }
    this.heartbeats.push(ref);
    return 'done';
  }

  resultFor(instanceId: string): LifecycleResult[] {
    return this.completed.filter((c) => c.ref.instanceId === instanceId).map((c) => c.result);
  }
}
