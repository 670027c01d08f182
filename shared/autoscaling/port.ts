/** The lifecycle action a hook is holding an instance in; the token proves it is the current one. */
export interface LifecycleActionRef {
  readonly autoScalingGroupName: string;
  readonly hookName: string;
  readonly token: string;
  readonly instanceId: string;
}

export type LifecycleResult = 'CONTINUE' | 'ABANDON';

/**
 * `gone` means Auto Scaling no longer holds that action (already completed by a duplicate event, timed out,
 * or the instance left the group): there is nothing left to complete, which a repeated event must tolerate.
 */
export type LifecycleCallOutcome = 'done' | 'gone';

export interface AutoScalingPort {
  completeLifecycleAction(ref: LifecycleActionRef, result: LifecycleResult): Promise<LifecycleCallOutcome>;
  recordLifecycleActionHeartbeat(ref: LifecycleActionRef): Promise<LifecycleCallOutcome>;
}
