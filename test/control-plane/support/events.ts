import { randomUUID } from 'node:crypto';
import type { SQSRecord } from 'aws-lambda';
import {
  LAUNCH_DETAIL_TYPE,
  STATE_CHANGE_DETAIL_TYPE,
  TERMINATE_DETAIL_TYPE,
} from '../../../shared/lifecycle/events.js';

/** EventBridge events as AWS emits them (shapes from the Auto Scaling and EC2 user guides). */
export interface EventOptions {
  readonly region?: string;
  readonly accountId?: string;
  readonly groupName?: string;
  readonly hookName?: string;
  readonly token?: string;
  readonly timeMs?: number;
}

export function launchEventBody(instanceId: string, o: EventOptions = {}): string {
  return lifecycleBody(LAUNCH_DETAIL_TYPE, 'autoscaling:EC2_INSTANCE_LAUNCHING', instanceId, o);
}

export function terminateEventBody(instanceId: string, o: EventOptions = {}): string {
  return lifecycleBody(TERMINATE_DETAIL_TYPE, 'autoscaling:EC2_INSTANCE_TERMINATING', instanceId, o);
}

function lifecycleBody(detailType: string, transition: string, instanceId: string, o: EventOptions): string {
  const region = o.region ?? 'us-east-1';
  const account = o.accountId ?? '123456789012';
  const group = o.groupName ?? 'nodes';
  return JSON.stringify({
    version: '0',
    id: randomUUID(),
    'detail-type': detailType,
    source: 'aws.autoscaling',
    account,
    time: new Date(o.timeMs ?? Date.now()).toISOString(),
    region,
    resources: [
      `arn:aws:autoscaling:${region}:${account}:autoScalingGroup:${randomUUID()}:autoScalingGroupName/${group}`,
    ],
    detail: {
      LifecycleActionToken: o.token ?? randomUUID(),
      AutoScalingGroupName: group,
      LifecycleHookName: o.hookName ?? 'vpc-lease',
      EC2InstanceId: instanceId,
      LifecycleTransition: transition,
      Origin: 'EC2',
      Destination: 'AutoScalingGroup',
    },
  });
}

export function stateChangeEventBody(instanceId: string, state: string, o: EventOptions = {}): string {
  const region = o.region ?? 'us-east-1';
  const account = o.accountId ?? '123456789012';
  return JSON.stringify({
    version: '0',
    id: randomUUID(),
    'detail-type': STATE_CHANGE_DETAIL_TYPE,
    source: 'aws.ec2',
    account,
    time: new Date(o.timeMs ?? Date.now()).toISOString(),
    region,
    resources: [`arn:aws:ec2:${region}:${account}:instance/${instanceId}`],
    detail: { 'instance-id': instanceId, state },
  });
}

/** An SQS record as the event source mapping hands it to the function. */
export function sqsRecord(messageId: string, body: string): SQSRecord {
  return {
    messageId,
    receiptHandle: `rh-${messageId}`,
    body,
    attributes: {
      ApproximateReceiveCount: '1',
      SentTimestamp: '0',
      SenderId: 'x',
      ApproximateFirstReceiveTimestamp: '0',
    },
    messageAttributes: {},
    md5OfBody: '',
    eventSource: 'aws:sqs',
    eventSourceARN: 'arn:aws:sqs:us-east-1:123456789012:q',
    awsRegion: 'us-east-1',
  };
}
