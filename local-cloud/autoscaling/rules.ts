import { asgErrors } from './errors.js';
import { LAUNCHING, TERMINATING } from './lifecycle-actions.js';
import type { LifecycleHook } from './model.js';

export interface PutHookInput {
  readonly groupName: string;
  readonly name: string;
  readonly transition?: string;
  readonly heartbeatTimeoutS?: number;
  readonly defaultResult?: string;
  readonly notificationMetadata?: string;
  readonly notificationTargetArn?: string;
  readonly roleArn?: string;
}

/** Min ≤ desired ≤ max, with the messages Auto Scaling answers. */
export function validateSizes(minSize: number, maxSize: number, desired: number): void {
  if (!Number.isInteger(minSize) || minSize < 0) throw asgErrors.validation('MinSize must be a non-negative integer.');
  if (!Number.isInteger(maxSize) || maxSize < minSize) {
    throw asgErrors.validation(`Max bound, ${maxSize}, must be greater than or equal to min bound, ${minSize}`);
  }
  if (!Number.isInteger(desired) || desired > maxSize || desired < minSize) {
    throw asgErrors.validation(
      `Desired capacity:${desired} must be between the specified min size:${minSize} and max size:${maxSize}`,
    );
  }
}

/** A new hook, or `existing` updated with the given fields (PutLifecycleHook is create-or-update). */
export function buildHook(input: PutHookInput, existing?: LifecycleHook): LifecycleHook {
  const transition = input.transition ?? existing?.transition;
  if (transition !== LAUNCHING && transition !== TERMINATING) {
    throw asgErrors.validation(`Invalid Lifecycle Transition: ${String(transition)}`);
  }
  const heartbeatTimeoutS = input.heartbeatTimeoutS ?? existing?.heartbeatTimeoutS ?? 3600;
  if (!Number.isInteger(heartbeatTimeoutS) || heartbeatTimeoutS < 30 || heartbeatTimeoutS > 7200) {
    throw asgErrors.validation(`Heartbeat timeout ${heartbeatTimeoutS} is not in the range 30 to 7200 seconds.`);
  }
  const defaultResult = input.defaultResult ?? existing?.defaultResult ?? 'ABANDON';
  if (defaultResult !== 'CONTINUE' && defaultResult !== 'ABANDON') {
    throw asgErrors.validation(
      `Invalid value for DefaultResult: ${defaultResult}. Valid values are CONTINUE or ABANDON.`,
    );
  }
  const notificationMetadata = input.notificationMetadata ?? existing?.notificationMetadata;
  const notificationTargetArn = input.notificationTargetArn ?? existing?.notificationTargetArn;
  const roleArn = input.roleArn ?? existing?.roleArn;
  return {
    name: input.name,
    groupName: input.groupName,
    transition,
    heartbeatTimeoutS,
    globalTimeoutS: Math.min(100 * heartbeatTimeoutS, 172_800),
    defaultResult,
    ...(notificationMetadata !== undefined ? { notificationMetadata } : {}),
    ...(notificationTargetArn !== undefined ? { notificationTargetArn } : {}),
    ...(roleArn !== undefined ? { roleArn } : {}),
  };
}
