import { randomUUID } from 'node:crypto';
import type { Activity, Group, GroupInstance } from './model.js';

/** Records a scaling activity on the group (newest first, the last 100), as DescribeScalingActivities lists them. */
export function startActivity(
  group: Group,
  description: string,
  cause: string,
  nowMs: number,
  instance?: GroupInstance,
): Activity {
  const activity: Activity = {
    ActivityId: randomUUID(),
    AutoScalingGroupName: group.name,
    AutoScalingGroupARN: group.arn,
    Description: description,
    Cause: cause,
    StartTime: new Date(nowMs),
    StatusCode: 'InProgress',
    Progress: 0,
    Details: JSON.stringify(
      instance ? { 'Subnet ID': instance.subnetId, 'Availability Zone': instance.availabilityZone } : {},
    ),
  };
  group.activities.unshift(activity);
  if (group.activities.length > 100) group.activities.pop();
  return activity;
}

export function finishActivity(
  activity: Activity,
  status: 'Successful' | 'Failed' | 'Cancelled',
  nowMs: number,
  message?: string,
): void {
  activity.StatusCode = status;
  activity.Progress = 100;
  activity.EndTime = new Date(nowMs);
  if (message) activity.StatusMessage = message;
}
