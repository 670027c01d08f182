import { VpcLeaseError } from '../../shared/errors.js';

/** An Auto Scaling API error: the Query `<Code>` (e.g. ValidationError, AlreadyExists) and AWS's message. */
export class AutoScalingError extends VpcLeaseError {
  constructor(
    readonly code: string,
    message: string,
    readonly statusCode = 400,
    readonly fault: 'Sender' | 'Receiver' = 'Sender',
  ) {
    super(message);
  }
}

export const asgErrors = {
  validation: (message: string): AutoScalingError => new AutoScalingError('ValidationError', message),
  groupNotFound: (name: string): AutoScalingError =>
    new AutoScalingError('ValidationError', `AutoScalingGroup name not found - AutoScalingGroup '${name}' not found`),
  alreadyExists: (name: string): AutoScalingError =>
    new AutoScalingError(
      'AlreadyExists',
      `AutoScalingGroup by this name already exists - A group with the name ${name} already exists`,
    ),
  noActionForToken: (token: string): AutoScalingError =>
    new AutoScalingError('ValidationError', `No active Lifecycle Action found with token ${token}`),
  noActionForInstance: (instanceId: string): AutoScalingError =>
    new AutoScalingError('ValidationError', `No active Lifecycle Action found with instance ID ${instanceId}`),
  instanceNotFound: (instanceId: string): AutoScalingError =>
    new AutoScalingError(
      'ValidationError',
      `Instance Id not found - No managed instance found for instance ID: ${instanceId}`,
    ),
  limitExceeded: (message: string): AutoScalingError => new AutoScalingError('LimitExceeded', message),
  resourceInUse: (message: string): AutoScalingError => new AutoScalingError('ResourceInUse', message),
  scalingActivityInProgress: (message: string): AutoScalingError =>
    new AutoScalingError('ScalingActivityInProgress', message),
};
