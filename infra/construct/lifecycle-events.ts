import { Annotations, Duration } from 'aws-cdk-lib';
import * as autoscaling from 'aws-cdk-lib/aws-autoscaling';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { HOOKLESS_LAUNCH_STATES } from '../../shared/lifecycle/hookless.js';

export interface LifecycleEventsProps {
  readonly clusterName: string;
  readonly autoScalingGroups: readonly (autoscaling.IAutoScalingGroup | string)[];
  readonly heartbeatTimeout: Duration;
  /** Also route EC2 `pending`/`running` state changes: launches without a hook. @default false */
  readonly hooklessLaunches?: boolean;
  readonly queue: sqs.IQueue;
  readonly deadLetterQueue: sqs.IQueue;
}

/** Lifecycle hook names, the same on every attached group (a name is unique per group, not per account). */
export function hookNames(clusterName: string): { readonly launch: string; readonly terminate: string } {
  // Hook names allow [A-Za-z0-9_/-]; cluster names may also contain '.'.
  const base = `vpc-lease-${clusterName.replace(/\./g, '-')}`;
  return { launch: `${base}-launch`, terminate: `${base}-terminate` };
}

export const LAUNCH_DETAIL_TYPE = 'EC2 Instance-launch Lifecycle Action';
export const TERMINATE_DETAIL_TYPE = 'EC2 Instance-terminate Lifecycle Action';
export const STATE_CHANGE_DETAIL_TYPE = 'EC2 Instance State-change Notification';

/**
 * Lifecycle hooks on exactly the attached groups, and the EventBridge rules that bring their events (and EC2
 * `terminated` state changes, for instances that leave without a hook) into the queue.
 */
export class LifecycleEvents extends Construct {
  readonly groupNames: readonly string[];
  readonly hooks: readonly autoscaling.LifecycleHook[];
  readonly lifecycleRule: events.Rule | undefined;
  readonly terminatedRule: events.Rule;
  /** EC2 `pending`/`running` state changes, with `hooklessLaunches`. */
  readonly launchStateRule: events.Rule | undefined;

  constructor(scope: Construct, id: string, props: LifecycleEventsProps) {
    super(scope, id);
    const names = hookNames(props.clusterName);
    const target = new targets.SqsQueue(props.queue, {
      deadLetterQueue: props.deadLetterQueue,
      retryAttempts: 8,
      // An event older than the hook's heartbeat window is useless (the action already timed out); EventBridge
      // accepts 60 s at least.
      maxEventAge: Duration.seconds(Math.max(60, props.heartbeatTimeout.toSeconds())),
    });
    const hooks: autoscaling.LifecycleHook[] = [];
    const groupNames: string[] = [];
    props.autoScalingGroups.forEach((given, index) => {
      const group =
        typeof given === 'string'
          ? autoscaling.AutoScalingGroup.fromAutoScalingGroupName(this, `Group${index}`, given)
          : given;
      groupNames.push(group.autoScalingGroupName);
      // No notification target: Auto Scaling sends lifecycle events to EventBridge on its own. A launch that
      // nobody completes is abandoned (a node without leases must not join); a terminate goes ahead anyway.
      hooks.push(
        new autoscaling.LifecycleHook(this, `LaunchHook${index}`, {
          autoScalingGroup: group,
          lifecycleHookName: names.launch,
          lifecycleTransition: autoscaling.LifecycleTransition.INSTANCE_LAUNCHING,
          heartbeatTimeout: props.heartbeatTimeout,
          defaultResult: autoscaling.DefaultResult.ABANDON,
        }),
        new autoscaling.LifecycleHook(this, `TerminateHook${index}`, {
          autoScalingGroup: group,
          lifecycleHookName: names.terminate,
          lifecycleTransition: autoscaling.LifecycleTransition.INSTANCE_TERMINATING,
          heartbeatTimeout: props.heartbeatTimeout,
          defaultResult: autoscaling.DefaultResult.CONTINUE,
        }),
      );
    });
    this.hooks = hooks;
    this.groupNames = groupNames;

    if (groupNames.length > 0) {
      this.lifecycleRule = new events.Rule(this, 'LifecycleRule', {
        description: `vpc-lease ${props.clusterName}: lifecycle actions of the attached Auto Scaling groups`,
        eventPattern: {
          source: ['aws.autoscaling'],
          detailType: [LAUNCH_DETAIL_TYPE, TERMINATE_DETAIL_TYPE],
          // Both filters: another tool's hook on the same group, or our hook name on a group of another
          // cluster, must not reach this queue.
          detail: { AutoScalingGroupName: groupNames, LifecycleHookName: [names.launch, names.terminate] },
        },
        targets: [target],
      });
    } else if (!props.hooklessLaunches) {
      Annotations.of(this).addWarningV2(
        'vpc-lease:no-groups',
        'no autoScalingGroups: no lifecycle hooks, so launched instances get no ENIs',
      );
    }
    // State changes carry no tags or group: the handler ignores instances the table does not know.
    this.terminatedRule = new events.Rule(this, 'TerminatedRule', {
      description: `vpc-lease ${props.clusterName}: EC2 instances terminated (also those without a hook)`,
      eventPattern: { source: ['aws.ec2'], detailType: [STATE_CHANGE_DETAIL_TYPE], detail: { state: ['terminated'] } },
      targets: [target],
    });
    // Every instance of the account and Region matches (EventBridge cannot see tags): the handler reads the
    // instance's tags and ignores those without the cluster tag.
    this.launchStateRule = props.hooklessLaunches
      ? new events.Rule(this, 'LaunchStateRule', {
          description: `vpc-lease ${props.clusterName}: EC2 instances pending or running (launches without a hook)`,
          eventPattern: {
            source: ['aws.ec2'],
            detailType: [STATE_CHANGE_DETAIL_TYPE],
            detail: { state: [...HOOKLESS_LAUNCH_STATES] },
          },
          targets: [target],
        })
      : undefined;
  }
}
