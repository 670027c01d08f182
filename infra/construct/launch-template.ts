import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type { Construct } from 'constructs';
import { clusterSumQuery, KIND_DIMENSION, METRIC_NAMES } from './metrics.js';

/**
 * Scale-out additions to the allocator (issue 17), kept in their own file so they do not collide with the
 * construct's other owners. So far: the alarm on EC2 errors that are not a node's fault. (Emitting the pod
 * ENIs in the node group's launch template is not built yet.)
 */

/** The `Kind` of Ec2Errors for errors of the account or deployment (shared/ec2/errors.ts). */
export const ACCOUNT_KIND = 'account';

export interface AccountErrorAlarmProps {
  readonly clusterName: string;
  readonly alarmActions: readonly cloudwatch.IAlarmAction[];
}

/**
 * Launches blocked by IAM rights that have not propagated, an account-wide ENI quota or an EC2 code this
 * version does not know are retried without end (abandoning would only replace the instance into the same
 * error): only an operator can end them, so the first one in five minutes alarms. `vpc-lease nodes` shows the
 * cause on each waiting node.
 */
export function accountErrorAlarm(scope: Construct, id: string, props: AccountErrorAlarmProps): cloudwatch.Alarm {
  const blocked = new cloudwatch.MathExpression({
    expression: clusterSumQuery(METRIC_NAMES.ec2Errors, props.clusterName, { [KIND_DIMENSION]: ACCOUNT_KIND }),
    label: 'EC2 calls refused for the account (not the node)',
    period: Duration.minutes(5),
  });
  const alarm = blocked.createAlarm(scope, id, {
    alarmDescription: `vpc-lease ${props.clusterName}: EC2 refuses calls for the account or the deployment's rights (UnauthorizedOperation, an account quota, an unknown code); launches wait and retry until fixed`,
    threshold: 1,
    evaluationPeriods: 1,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  });
  alarm.addAlarmAction(...props.alarmActions);
  return alarm;
}
