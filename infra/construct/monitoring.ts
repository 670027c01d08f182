import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import {
  CLUSTER_DIMENSION,
  clusterSumQuery,
  KIND_DIMENSION,
  METRIC_NAMES,
  METRIC_NAMESPACE,
  REASON_DIMENSION,
  SERVICE_DIMENSION,
  SUBNETS_EXHAUSTED_REASON,
  THROTTLING_KIND,
} from './metrics.js';

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
  readonly untrustedLeaseAlarm: cloudwatch.Alarm;
  readonly oversizedPartitionAlarm: cloudwatch.Alarm;
  readonly lowLeasesAlarm: cloudwatch.Alarm;
  readonly ec2ThrottlingAlarm: cloudwatch.Alarm;
  readonly subnetFullAlarm: cloudwatch.Alarm;
  readonly subnetsExhaustedAlarm: cloudwatch.Alarm;
  readonly functionErrorAlarms: readonly cloudwatch.Alarm[];
  readonly dashboard: cloudwatch.Dashboard;

  constructor(scope: Construct, id: string, props: MonitoringProps) {
    super(scope, id);
    const period = Duration.minutes(5);
    // Emitted with a free-form Reason dimension: summed over every dimension set of this cluster.
    const abandoned = new cloudwatch.MathExpression({
      expression: clusterSumQuery(METRIC_NAMES.launchesAbandoned, props.clusterName),
      label: 'Launches abandoned',
      period,
    });
    const untrusted = new cloudwatch.MathExpression({
      expression: clusterSumQuery(METRIC_NAMES.untrustedLeasesRejected, props.clusterName),
      label: 'Untrusted leases rejected',
      period,
    });
    // A count a Lambda emits on every run under exactly {Service, ClusterName}: its largest in the period.
    const perRunCount = (metricName: string, service: string): cloudwatch.Metric =>
      new cloudwatch.Metric({
        namespace: METRIC_NAMESPACE,
        metricName,
        dimensionsMap: { [SERVICE_DIMENSION]: service, [CLUSTER_DIMENSION]: props.clusterName },
        statistic: cloudwatch.Stats.MAXIMUM,
        period,
      });
    const oversized = perRunCount(METRIC_NAMES.oversizedPartitions, 'reconciler');
    const lowNodes = perRunCount(METRIC_NAMES.nodesLowOnLeases, 'pool-manager');
    const throttled = new cloudwatch.MathExpression({
      expression: clusterSumQuery(METRIC_NAMES.ec2Errors, props.clusterName, { [KIND_DIMENSION]: THROTTLING_KIND }),
      label: 'EC2 calls throttled',
      period,
    });
    const subnetFull = new cloudwatch.MathExpression({
      expression: clusterSumQuery(METRIC_NAMES.subnetFull, props.clusterName),
      label: 'Pod ENIs refused for subnet room',
      period,
    });
    const subnetsExhausted = new cloudwatch.MathExpression({
      expression: clusterSumQuery(METRIC_NAMES.launchesAbandoned, props.clusterName, {
        [REASON_DIMENSION]: SUBNETS_EXHAUSTED_REASON,
      }),
      label: 'Launches abandoned: every subnet full',
      period,
    });
    const dlqDepth = props.deadLetterQueue.metricApproximateNumberOfMessagesVisible({
      period: Duration.minutes(1),
      statistic: cloudwatch.Stats.MAXIMUM,
    });
    const prefix = `vpc-lease ${props.clusterName}`;
    /**
     * Every alarm fires at or above its threshold, treats missing data as fine (the custom metrics are only
     * emitted when something happens) and notifies the configured actions; `periods` > 1 asks for that many
     * breaching periods in a row.
     */
    const alarmOn = (
      metric: cloudwatch.Metric | cloudwatch.MathExpression,
      id: string,
      description: string,
      threshold: number,
      periods = 1,
    ): cloudwatch.Alarm => {
      const alarm = metric.createAlarm(this, id, {
        alarmDescription: `${prefix}: ${description}`,
        threshold,
        evaluationPeriods: periods,
        ...(periods > 1 ? { datapointsToAlarm: periods } : {}),
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      });
      alarm.addAlarmAction(...props.alarmActions);
      return alarm;
    };

    this.deadLetterAlarm = alarmOn(
      dlqDepth,
      'DeadLettersAlarm',
      'events or stream batches failed every retry and wait in the dead-letter queue',
      1,
    );
    this.abandonedLaunchAlarm = alarmOn(
      abandoned,
      'AbandonedLaunchesAlarm',
      'a launch was abandoned (the reason is on the node item and in the logs)',
      1,
    );
    // A dip below the low watermark is normal while a top-up runs; three periods in a row is not.
    this.lowLeasesAlarm = alarmOn(
      lowNodes,
      'LowClaimableLeasesAlarm',
      'nodes stayed below the low watermark of claimable leases for 15 minutes',
      1,
      3,
    );
    // Throttled calls are retried; the rate budget schedules ours, so sustained throttling (two periods) means
    // another tool shares the account's buckets (lower the budget's rate share) or the budget is off.
    this.ec2ThrottlingAlarm = alarmOn(
      throttled,
      'Ec2ThrottlingAlarm',
      'EC2 keeps throttling the control plane (another caller in the account? lower VPC_LEASE_EC2_BUDGET_RATE_SHARE)',
      10,
      2,
    );
    // A refusal alone is handled (the ENI moves to another subnet); that it happens at all means a pod subnet
    // is full or fragmented and the next ones will follow. Which one is on the node item (subnetRefusals).
    this.subnetFullAlarm = alarmOn(
      subnetFull,
      'SubnetFullAlarm',
      'EC2 refused pod ENIs for lack of room in a pod subnet (vpc-lease subnets shows free addresses and /28s; grow or add a subnet)',
      1,
    );
    this.subnetsExhaustedAlarm = alarmOn(
      subnetsExhausted,
      'SubnetsExhaustedAlarm',
      'a launch was abandoned because no pod subnet of its AZ had room for minLeases: new nodes get no pods until a subnet is added',
      1,
    );
    this.functionErrorAlarms = Object.entries(props.functions).map(([name, fn]) =>
      alarmOn(
        fn.metricErrors({ period: Duration.minutes(5), statistic: cloudwatch.Stats.SUM }),
        `${name}ErrorsAlarm`,
        `${name} invocations failed`,
        1,
      ),
    );
    // Honest nodes never write a lease the control plane must refuse: one is a node to investigate.
    this.untrustedLeaseAlarm = alarmOn(
      untrusted,
      'UntrustedLeasesAlarm',
      'a node wrote lease items the control plane refused to act on (reason and instance in the pool-manager logs)',
      1,
    );
    // Only a node writing far more than the control plane ever does fills a partition past the read bound: that
    // node's pool sweep fails every hour until its items are deleted.
    this.oversizedPartitionAlarm = alarmOn(
      oversized,
      'OversizedPartitionsAlarm',
      'the census left a node partition unread for its size: a node is flooding it (instance in the reconciler logs, "left unread")',
      1,
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
              this.untrustedLeaseAlarm,
              this.oversizedPartitionAlarm,
              this.lowLeasesAlarm,
              this.ec2ThrottlingAlarm,
              this.subnetFullAlarm,
              this.subnetsExhaustedAlarm,
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
          new cloudwatch.GraphWidget({
            title: 'Launches abandoned / subnet refusals / untrusted leases, oversized partitions',
            left: [abandoned, subnetsExhausted, subnetFull],
            right: [untrusted, oversized],
            width: 8,
          }),
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
