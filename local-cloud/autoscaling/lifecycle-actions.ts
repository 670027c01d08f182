import { randomUUID } from 'node:crypto';
import type { Logger } from '../../shared/log.js';
import type { BusEvent, LifecycleTransition } from '../events/event.js';
import { lifecycleActionEvent } from '../events/event.js';
import type { SimScheduler } from '../events/scheduler.js';
import { asgErrors } from './errors.js';
import type { Group, GroupInstance, LifecycleAction, LifecycleActionResult, LifecycleHook } from './model.js';

export const LAUNCHING: LifecycleTransition = 'autoscaling:EC2_INSTANCE_LAUNCHING';
export const TERMINATING: LifecycleTransition = 'autoscaling:EC2_INSTANCE_TERMINATING';

export interface ActionRef {
  readonly groupName: string;
  readonly hookName: string;
  readonly token?: string;
  readonly instanceId?: string;
}

export interface LifecycleActionsDeps {
  readonly scheduler: SimScheduler;
  readonly region: string;
  readonly accountId: string;
  readonly groups: ReadonlyMap<string, Group>;
  readonly log: Logger;
  readonly emit?: (event: BusEvent) => void;
  readonly notify?: (targetArn: string, body: string) => void;
  /** Every launch action of the instance is CONTINUE, or one is ABANDON (the others are cancelled). */
  readonly onLaunchResolved: (
    group: Group,
    instance: GroupInstance,
    result: LifecycleActionResult,
    hookName: string,
  ) => void;
  /** Every terminate action of the instance has a result (either result lets the termination proceed). */
  readonly onTerminateResolved: (group: Group, instance: GroupInstance) => void;
}

/**
 * Lifecycle actions: one per (instance, hook) while the instance waits. Each emits its EventBridge event (and
 * Auto Scaling's own notification to a NotificationTargetARN), applies the hook's DefaultResult when its
 * heartbeat timeout passes, and accepts a result only with its own token, or by instance id.
 */
export class LifecycleActions {
  constructor(private readonly deps: LifecycleActionsDeps) {}

  start(group: Group, instance: GroupInstance, hook: LifecycleHook): void {
    const { scheduler } = this.deps;
    const token = randomUUID();
    const now = scheduler.clock.nowMs();
    const action: LifecycleAction = {
      token,
      hookName: hook.name,
      instanceId: instance.instanceId,
      transition: hook.transition,
      startedMs: now,
      globalDeadlineMs: now + scheduler.realMs(hook.globalTimeoutS * 1000),
      cancelTimer: () => {},
    };
    action.cancelTimer = scheduler.after(hook.heartbeatTimeoutS * 1000, () => this.expire(group, instance, action));
    instance.actions.set(hook.name, action);
    const metadata = hook.notificationMetadata !== undefined ? { NotificationMetadata: hook.notificationMetadata } : {};
    this.deps.emit?.(
      lifecycleActionEvent({
        region: this.deps.region,
        accountId: this.deps.accountId,
        groupArn: group.arn,
        atMs: now,
        detail: {
          LifecycleActionToken: token,
          AutoScalingGroupName: group.name,
          LifecycleHookName: hook.name,
          EC2InstanceId: instance.instanceId,
          LifecycleTransition: hook.transition,
          ...metadata,
        },
      }),
    );
    if (hook.notificationTargetArn && this.deps.notify) {
      const launching = hook.transition === LAUNCHING;
      this.deps.notify(
        hook.notificationTargetArn,
        JSON.stringify({
          Origin: launching ? 'EC2' : 'AutoScalingGroup',
          LifecycleHookName: hook.name,
          Destination: launching ? 'AutoScalingGroup' : 'EC2',
          AccountId: this.deps.accountId,
          RequestId: randomUUID(),
          LifecycleTransition: hook.transition,
          AutoScalingGroupName: group.name,
          Service: 'AWS Auto Scaling',
          Time: new Date(now).toISOString(),
          EC2InstanceId: instance.instanceId,
          LifecycleActionToken: token,
          ...metadata,
        }),
      );
    }
  }

  complete(ref: ActionRef, result: string): void {
    if (result !== 'CONTINUE' && result !== 'ABANDON') {
      throw asgErrors.validation(
        `Invalid value for LifecycleActionResult: ${result}. Valid values are CONTINUE or ABANDON.`,
      );
    }
    const { group, instance, action } = this.find(ref);
    this.apply(group, instance, action, result);
  }

  /** Restarts the heartbeat timeout, never past the action's global timeout. */
  heartbeat(ref: ActionRef): void {
    const { scheduler } = this.deps;
    const { group, instance, action } = this.find(ref);
    const timeoutS = group.hooks.get(action.hookName)?.heartbeatTimeoutS ?? 3600;
    action.cancelTimer();
    const leftRealMs = action.globalDeadlineMs - scheduler.clock.nowMs();
    const untilRealMs = Math.max(0, Math.min(scheduler.realMs(timeoutS * 1000), leftRealMs));
    const simMs = scheduler.timeScale === 0 ? 0 : untilRealMs / scheduler.timeScale;
    action.cancelTimer = scheduler.after(simMs, () => this.expire(group, instance, action));
  }

  /** Drops every pending action of the instance (termination, group deletion). */
  cancelAll(instance: GroupInstance): void {
    for (const action of instance.actions.values()) action.cancelTimer();
    instance.actions.clear();
  }

  private expire(group: Group, instance: GroupInstance, action: LifecycleAction): void {
    if (instance.actions.get(action.hookName) !== action || action.result) return;
    const result = group.hooks.get(action.hookName)?.defaultResult ?? 'ABANDON';
    this.deps.log.info('lifecycle action timed out; applying the default result', {
      group: group.name,
      hook: action.hookName,
      instanceId: instance.instanceId,
      result,
    });
    this.apply(group, instance, action, result);
  }

  private find(ref: ActionRef): { group: Group; instance: GroupInstance; action: LifecycleAction } {
    if (ref.token === undefined && ref.instanceId === undefined) {
      throw asgErrors.validation('Either LifecycleActionToken or InstanceId must be specified.');
    }
    const notFound = (): Error =>
      ref.token !== undefined
        ? asgErrors.noActionForToken(ref.token)
        : asgErrors.noActionForInstance(ref.instanceId ?? '');
    const group = this.deps.groups.get(ref.groupName);
    if (!group) throw notFound();
    for (const instance of group.instances.values()) {
      if (ref.instanceId !== undefined && instance.instanceId !== ref.instanceId) continue;
      const action = instance.actions.get(ref.hookName);
      if (!action || action.result) continue;
      if (ref.token !== undefined && action.token !== ref.token) continue;
      return { group, instance, action };
    }
    throw notFound();
  }

  private apply(group: Group, instance: GroupInstance, action: LifecycleAction, result: LifecycleActionResult): void {
    action.result = result;
    action.cancelTimer();
    const actions = [...instance.actions.values()];
    if (action.transition === LAUNCHING) {
      if (result === 'ABANDON') {
        this.cancelAll(instance);
        this.deps.onLaunchResolved(group, instance, 'ABANDON', action.hookName);
      } else if (actions.every((a) => a.result === 'CONTINUE')) {
        instance.actions.clear();
        this.deps.onLaunchResolved(group, instance, 'CONTINUE', action.hookName);
      }
      return;
    }
    if (actions.every((a) => a.result !== undefined)) {
      instance.actions.clear();
      this.deps.onTerminateResolved(group, instance);
    }
  }
}
