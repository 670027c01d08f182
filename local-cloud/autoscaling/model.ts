import type { LifecycleTransition } from '../events/event.js';

export type LifecycleState =
  | 'Pending'
  | 'Pending:Wait'
  | 'Pending:Proceed'
  | 'InService'
  | 'Terminating'
  | 'Terminating:Wait'
  | 'Terminating:Proceed'
  | 'Terminated';

export type LifecycleActionResult = 'CONTINUE' | 'ABANDON';

export interface LaunchTemplateSpec {
  readonly LaunchTemplateId?: string;
  readonly LaunchTemplateName?: string;
  readonly Version?: string;
}

export interface LifecycleHook {
  readonly name: string;
  readonly groupName: string;
  readonly transition: LifecycleTransition;
  readonly heartbeatTimeoutS: number;
  /** AWS: the smaller of 100 × HeartbeatTimeout and 48 hours. */
  readonly globalTimeoutS: number;
  readonly defaultResult: LifecycleActionResult;
  readonly notificationMetadata?: string;
  readonly notificationTargetArn?: string;
  readonly roleArn?: string;
}

export interface LifecycleAction {
  readonly token: string;
  readonly hookName: string;
  readonly instanceId: string;
  readonly transition: LifecycleTransition;
  readonly startedMs: number;
  /** Real ms after which no heartbeat can extend the action. */
  readonly globalDeadlineMs: number;
  result?: LifecycleActionResult;
  cancelTimer: () => void;
}

export interface GroupTag {
  readonly Key: string;
  readonly Value: string;
  readonly PropagateAtLaunch: boolean;
}

export interface GroupInstance {
  readonly instanceId: string;
  readonly instanceType: string;
  readonly availabilityZone: string;
  readonly subnetId: string;
  readonly launchedMs: number;
  lifecycleState: LifecycleState;
  healthStatus: 'Healthy' | 'Unhealthy';
  protectedFromScaleIn: boolean;
  ec2Running: boolean;
  readonly actions: Map<string, LifecycleAction>;
}

export interface Activity {
  readonly ActivityId: string;
  readonly AutoScalingGroupName: string;
  readonly AutoScalingGroupARN: string;
  readonly Description: string;
  readonly Cause: string;
  readonly StartTime: Date;
  EndTime?: Date;
  StatusCode: 'InProgress' | 'Successful' | 'Failed' | 'Cancelled' | 'WaitingForSpotInstanceId';
  StatusMessage?: string;
  Progress: number;
  readonly Details: string;
}

export interface Group {
  readonly name: string;
  readonly arn: string;
  readonly createdMs: number;
  minSize: number;
  maxSize: number;
  desiredCapacity: number;
  launchTemplate: LaunchTemplateSpec | undefined;
  /** Overrides of a MixedInstancesPolicy, in priority order; the first is launched. */
  instanceTypes: string[];
  subnetIds: string[];
  defaultCooldownS: number;
  healthCheckType: string;
  healthCheckGracePeriodS: number;
  newInstancesProtectedFromScaleIn: boolean;
  readonly tags: Map<string, GroupTag>;
  readonly hooks: Map<string, LifecycleHook>;
  readonly instances: Map<string, GroupInstance>;
  readonly activities: Activity[];
  deleting: boolean;
}
