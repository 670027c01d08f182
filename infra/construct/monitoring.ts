import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { CLUSTER_DIMENSION, METRIC_NAMES, METRIC_NAMESPACE, SERVICE_DIMENSION, THROTTLING_KIND } from './metrics.js';

export interface MonitoringProps {
  readonly clusterName: string;
  readonly queue: sqs.IQueue;
  readonly deadLetterQueue: sqs.IQueue;
  readonly functions: Readonly<Record<string, lambda.IFunction>>;
  readonly alarmActions: readonly cloudwatch.IAlarmAction[];
}

/** The alarms an operator needs to act on, and one dashboard to look at when they fire. */
export class Monitoring extends Construct {
  readonly deadLetterAlarm: cloudwatch.Alarm;
  readonly abandonedLaunchAlarm: cloudwatch.Alarm;
  readonly lowLeasesAlarm: cloudwatch.Alarm;
  readonly ec2ThrottlingAlarm: cloudwatch.Alarm;
  readonly functionErrorAlarms: readonly cloudwatch.Alarm[];
  readonly dashboard: cloudwatch.Dashboard;

  constructor(scope: Construct, id: string, props: MonitoringProps) {
    super(scope, id);
    const period = Duration.minutes(5);
    // Emitted with a free-form Reason dimension (and no cluster): summed over every dimension set.
    const abandoned = new cloudwatch.MathExpression({
      expression: `SELECT SUM(${METRIC_NAMES.launchesAbandoned}) FROM "${METRIC_NAMESPACE}"`,
      label: 'Launches abandoned',
      period,
    });
    const lowNodes = new cloudwatch.Metric({
      namespace: METRIC_NAMESPACE,
      metricName: METRIC_NAMES.nodesLowOnLeases,
      dimensionsMap: { [SERVICE_DIMENSION]: 'pool-manager', [CLUSTER_DIMENSION]: props.clusterName },
      statistic: cloudwatch.Stats.MAXIMUM,
      period,
    });
    const throttled = new cloudwatch.MathExpression({
      expression: `SELECT SUM(${METRIC_NAMES.ec2Errors}) FROM "${METRIC_NAMESPACE}" WHERE Kind = '${THROTTLING_KIND}'`,
      label: 'EC2 calls throttled',
      period,
    });
    const dlqDepth = props.deadLetterQueue.metricApproximateNumberOfMessagesVisible({
      period: Duration.minutes(1),
      statistic: cloudwatch.Stats.MAXIMUM,
    });
    const prefix = `vpc-lease ${props.clusterName}`;
    const withActions = (alarm: cloudwatch.Alarm): cloudwatch.Alarm => {
      alarm.addAlarmAction(...props.alarmActions);
      return alarm;
    };

    this.deadLetterAlarm = withActions(
      dlqDepth.createAlarm(this, 'DeadLettersAlarm', {
        alarmDescription: `${prefix}: events or stream batches failed every retry and wait in the dead-letter queue`,
        threshold: 1,
        evaluationPeriods: 1,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
    );
    this.abandonedLaunchAlarm = withActions(
      abandoned.createAlarm(this, 'AbandonedLaunchesAlarm', {
        alarmDescription: `${prefix}: a launch was abandoned (the reason is on the node item and in the logs)`,
        threshold: 1,
        evaluationPeriods: 1,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
    );
    // A dip below the low watermark is normal while a top-up runs; three periods in a row is not.
    this.lowLeasesAlarm = withActions(
      lowNodes.createAlarm(this, 'LowClaimableLeasesAlarm', {
        alarmDescription: `${prefix}: nodes stayed below the low watermark of claimable leases for 15 minutes`,
        threshold: 1,
        evaluationPeriods: 3,
        datapointsToAlarm: 3,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
    );
    // Throttled calls are retried; only sustained throttling (two periods) means maxConcurrency is too high
    // or another tool shares the account's buckets.
    this.ec2ThrottlingAlarm = withActions(
      throttled.createAlarm(this, 'Ec2ThrottlingAlarm', {
        alarmDescription: `${prefix}: EC2 keeps throttling the control plane (lower maxConcurrency?)`,
        threshold: 10,
        evaluationPeriods: 2,
        datapointsToAlarm: 2,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
    );
    this.functionErrorAlarms = Object.entries(props.functions).map(([name, fn]) =>
      withActions(
        fn
          .metricErrors({ period: Duration.minutes(5), statistic: cloudwatch.Stats.SUM })
          .createAlarm(this, `${name}ErrorsAlarm`, {
            alarmDescription: `${prefix}: ${name} invocations failed`,
            threshold: 1,
            evaluationPeriods: 1,
            comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
          }),
      ),
    );

    const fns = Object.entries(props.functions);
    this.dashboard = new cloudwatch.Dashboard(this, 'Dashboard', {
      defaultInterval: Duration.hours(3),
      widgets: [
        [
          new cloudwatch.AlarmStatusWidget({
            title: `${prefix} alarms`,
            alarms: [
              this.deadLetterAlarm,
              this.abandonedLaunchAlarm,
              this.lowLeasesAlarm,
              this.ec2ThrottlingAlarm,
              ...this.functionErrorAlarms,
            ],
            width: 24,
          }),
        ],
        [
          new cloudwatch.GraphWidget({
            title: 'Lifecycle events',
            left: [
              props.queue.metricApproximateNumberOfMessagesVisible(),
              props.queue.metricApproximateAgeOfOldestMessage(),
            ],
            right: [dlqDepth],
            width: 8,
          }),
          new cloudwatch.GraphWidget({ title: 'Launches abandoned', left: [abandoned], width: 8 }),
          new cloudwatch.GraphWidget({
            title: 'Nodes low on leases / EC2 throttled',
            left: [lowNodes],
            right: [throttled],
            width: 8,
          }),
        ],
        [
          new cloudwatch.GraphWidget({
            title: 'Invocations',
            left: fns.map(([name, fn]) => fn.metricInvocations({ label: name })),
            width: 8,
          }),
          new cloudwatch.GraphWidget({
            title: 'Errors and throttles',
            left: fns.map(([name, fn]) => fn.metricErrors({ label: `${name} errors` })),
            right: fns.map(([name, fn]) => fn.metricThrottles({ label: `${name} throttles` })),
            width: 8,
          }),
          new cloudwatch.GraphWidget({
            title: 'Duration p99',
            left: fns.map(([name, fn]) => fn.metricDuration({ label: name, statistic: 'p99' })),
            width: 8,
          }),
        ],
      ],
    });
  }
}
