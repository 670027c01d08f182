import { randomUUID } from 'node:crypto';
import { partitionIdOfRegion } from '../../shared/domain/partition.js';
import type { InstanceStateChange } from '../ports.js';

/**
 * Events in the envelope EventBridge delivers (the SQS message body of a rule target is exactly this JSON).
 * Shapes follow the AWS documentation's examples: Auto Scaling "EC2 Instance-launch Lifecycle Action" /
 * "EC2 Instance-terminate Lifecycle Action" and EC2 "EC2 Instance State-change Notification".
 */
export interface BusEvent<TDetail extends object = object> {
  readonly version: '0';
  readonly id: string;
  readonly 'detail-type': string;
  readonly source: string;
  readonly account: string;
  /** ISO 8601 to the second, as EventBridge writes it ("2026-01-01T00:00:00Z"). */
  readonly time: string;
  readonly region: string;
  readonly resources: readonly string[];
  readonly detail: TDetail;
}

export type LifecycleTransition = 'autoscaling:EC2_INSTANCE_LAUNCHING' | 'autoscaling:EC2_INSTANCE_TERMINATING';

export interface LifecycleActionDetail {
  readonly LifecycleActionToken: string;
  readonly AutoScalingGroupName: string;
  readonly LifecycleHookName: string;
  readonly EC2InstanceId: string;
  readonly LifecycleTransition: LifecycleTransition;
  /** Present only when the hook has NotificationMetadata, as in AWS's events. */
  readonly NotificationMetadata?: string;
  readonly Origin: 'EC2' | 'AutoScalingGroup' | 'WarmPool';
  readonly Destination: 'EC2' | 'AutoScalingGroup' | 'WarmPool';
}

export interface InstanceStateChangeDetail {
  readonly 'instance-id': string;
  readonly state: string;
}

export const LAUNCH_LIFECYCLE_ACTION = 'EC2 Instance-launch Lifecycle Action';
export const TERMINATE_LIFECYCLE_ACTION = 'EC2 Instance-terminate Lifecycle Action';
export const INSTANCE_STATE_CHANGE = 'EC2 Instance State-change Notification';

/** EventBridge's `time` has no fractional seconds. */
export function eventTime(atMs: number): string {
  return new Date(atMs).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

export interface LifecycleActionEventInput {
  readonly region: string;
  readonly accountId: string;
  readonly groupArn: string;
  readonly atMs: number;
  readonly detail: Omit<LifecycleActionDetail, 'Origin' | 'Destination'>;
}

export function lifecycleActionEvent(input: LifecycleActionEventInput): BusEvent<LifecycleActionDetail> {
  const launching = input.detail.LifecycleTransition === 'autoscaling:EC2_INSTANCE_LAUNCHING';
  const { NotificationMetadata, ...rest } = input.detail;
  return {
    version: '0',
    id: randomUUID(),
    'detail-type': launching ? LAUNCH_LIFECYCLE_ACTION : TERMINATE_LIFECYCLE_ACTION,
    source: 'aws.autoscaling',
    account: input.accountId,
    time: eventTime(input.atMs),
    region: input.region,
    resources: [input.groupArn],
    detail: {
      ...rest,
      ...(NotificationMetadata !== undefined ? { NotificationMetadata } : {}),
      Origin: launching ? 'EC2' : 'AutoScalingGroup',
      Destination: launching ? 'AutoScalingGroup' : 'EC2',
    },
  };
}

export function instanceStateChangeEvent(
  change: InstanceStateChange,
  region: string,
  accountId: string,
): BusEvent<InstanceStateChangeDetail> {
  return {
    version: '0',
    id: randomUUID(),
    'detail-type': INSTANCE_STATE_CHANGE,
    source: 'aws.ec2',
    account: accountId,
    time: eventTime(change.atMs),
    region,
    resources: [`arn:${partitionIdOfRegion(region)}:ec2:${region}:${accountId}:instance/${change.instanceId}`],
    detail: { 'instance-id': change.instanceId, state: change.state },
  };
}
