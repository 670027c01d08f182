import { Annotations, Duration, RemovalPolicy } from 'aws-cdk-lib';
import type * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import type * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sources from 'aws-cdk-lib/aws-lambda-event-sources';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { type ControlPlaneConfig, controlPlaneConfigToEnv } from '../../shared/config/control-plane.js';
import { EC2_BUCKETS_ENV } from '../../shared/ec2/budget-env.js';
import { LEASE_SORT_PREFIX, NODE_SORT_KEY, TABLE_KEYS } from '../../shared/lease-store/table.js';
import { clusterTagKey } from '../../shared/lifecycle/hookless.js';
import { ControlPlaneFunction } from './control-plane-function.js';
import { EventQueue } from './event-queue.js';
import { eniCollectorStatements, eniManagerStatements, lifecycleActionStatements } from './lambda-policies.js';
import { accountErrorAlarm } from './launch-template.js';
import { createLeaseTable } from './lease-table.js';
import { LifecycleEvents } from './lifecycle-events.js';
import { Monitoring } from './monitoring.js';
import { suppressAllocatorFindings } from './nag-suppressions.js';
import { VpcLeaseNodeImage } from './node-image.js';
import { createNodePolicy } from './node-policy.js';
import { resolveAllocatorProps, type VpcLeaseAllocatorProps } from './props.js';

/** Env var holding the event queue's URL, for work the lifecycle Lambda re-enqueues with a delay. */
export const QUEUE_URL_ENV = 'VPC_LEASE_QUEUE_URL';

// The lifecycle Lambda never waits on EC2 (work that must wait is re-enqueued with a delay) and handles a
// batch's records concurrently, so 40 s is ample. The queue's visibility timeout is six times this (AWS's
// rule for SQS sources), and that is also how long a failed record waits for its retry: 240 s stays inside
// the default 300 s heartbeat window, so a failure gets a second try before the hook expires.
const LIFECYCLE_TIMEOUT = Duration.seconds(40);
const POOL_TIMEOUT = Duration.seconds(60);
const RECONCILE_TIMEOUT = Duration.minutes(3);
const MAX_RECEIVE_COUNT = 5;

/**
 * Everything vpc-lease needs in one account and Region for one cluster: the lease table, the event queue, the
 * lifecycle hooks and rules of the attached Auto Scaling groups, the three Lambdas with least-privilege roles,
 * the node policy for the cluster's instance role, alarms and a dashboard.
 */
export class VpcLeaseAllocator extends Construct {
  readonly config: ControlPlaneConfig;
  readonly table: dynamodb.Table;
  readonly queue: sqs.Queue;
  readonly deadLetterQueue: sqs.Queue;
  /** Attach to the cluster's instance role (also done for `nodeRoles`). */
  readonly nodePolicy: iam.ManagedPolicy;
  readonly lifecycleFunction: lambda.IFunction;
  readonly poolManagerFunction: lambda.IFunction;
  readonly reconcilerFunction: lambda.IFunction;
  readonly lifecycleEvents: LifecycleEvents;
  readonly monitoring: Monitoring;
  /** EC2 errors that are not a node's fault (launch-template.ts). */
  readonly accountErrorAlarm: cloudwatch.Alarm;
  /** The installer image's URI and output, when `nodeImageUri` is given. */
  readonly nodeImage?: VpcLeaseNodeImage;

  constructor(scope: Construct, id: string, props: VpcLeaseAllocatorProps) {
    super(scope, id);
    // Validate first, with the Lambdas' own parser, so a bad value fails `cdk synth` rather than a deploy.
    const resolved = resolveAllocatorProps(props);
    this.config = resolved.config;
    const { clusterName } = resolved.config;

    this.table = createLeaseTable(this, 'Leases', {
      tableName: resolved.tableName,
      removalPolicy: resolved.removalPolicy,
      deletionProtection: resolved.removalPolicy === RemovalPolicy.RETAIN,
    });
    const queues = new EventQueue(this, 'Queue', {
      consumerTimeout: LIFECYCLE_TIMEOUT,
      maxReceiveCount: MAX_RECEIVE_COUNT,
    });
    this.queue = queues.queue;
    this.deadLetterQueue = queues.deadLetterQueue;
    this.lifecycleEvents = new LifecycleEvents(this, 'LifecycleEvents', {
      clusterName,
      autoScalingGroups: resolved.autoScalingGroups,
      heartbeatTimeout: Duration.seconds(resolved.config.heartbeatTimeoutS),
      hooklessLaunches: resolved.hooklessLaunches,
      queue: this.queue,
      deadLetterQueue: this.deadLetterQueue,
    });
    const retryAfterS = queues.visibilityTimeout.toSeconds();
    if (resolved.config.heartbeatTimeoutS <= retryAfterS)
      Annotations.of(this).addWarningV2(
        'vpc-lease:heartbeat-shorter-than-retry',
        `heartbeatTimeout (${resolved.config.heartbeatTimeoutS} s) is not longer than the queue's visibility ` +
          `timeout (${retryAfterS} s): a launch whose record fails once is abandoned before SQS redelivers it`,
      );
    const ec2Scope = {
      clusterName,
      vpcId: resolved.vpcId,
      groupNames: this.lifecycleEvents.groupNames,
      ...(resolved.hooklessLaunches ? { instanceTagKey: clusterTagKey(resolved.config) } : {}),
    };

    const environment = {
      ...controlPlaneConfigToEnv({
        ...resolved.config,
        tableName: this.table.tableName,
        podSubnetIds: resolved.podSubnetIds,
        securityGroupIds: resolved.securityGroupIds,
      }),
      ...(Object.keys(resolved.ec2Buckets).length > 0
        ? { [EC2_BUCKETS_ENV]: JSON.stringify(resolved.ec2Buckets) }
        : {}),
    };
    const common = {
      environment,
      logRetention: resolved.logRetention,
      logRemovalPolicy: RemovalPolicy.DESTROY,
      memorySizeMb: 512,
    };

    const lifecycle = new ControlPlaneFunction(this, 'InstanceLifecycle', {
      ...common,
      handler: 'instance-lifecycle',
      description: `vpc-lease ${clusterName}: ENIs and leases on instance launch and terminate`,
      timeout: LIFECYCLE_TIMEOUT,
      environment: { ...environment, [QUEUE_URL_ENV]: this.queue.queueUrl },
    });
    this.queue.grantSendMessages(lifecycle.role);
    this.table.grantReadWriteData(lifecycle.role);
    for (const s of [...eniManagerStatements(this, ec2Scope), ...lifecycleActionStatements(this, ec2Scope.groupNames)])
      lifecycle.role.addToPrincipalPolicy(s);
    lifecycle.fn.addEventSource(
      new sources.SqsEventSource(this.queue, {
        batchSize: 10,
        reportBatchItemFailures: true,
        maxConcurrency: resolved.maxConcurrency,
      }),
    );
    this.lifecycleFunction = lifecycle.fn;

    const pool = new ControlPlaneFunction(this, 'PoolManager', {
      ...common,
      handler: 'pool-manager',
      description: `vpc-lease ${clusterName}: keeps claimable leases between the watermarks`,
      timeout: POOL_TIMEOUT,
    });
    this.table.grantReadWriteData(pool.role);
    for (const s of eniManagerStatements(this, ec2Scope)) pool.role.addToPrincipalPolicy(s);
    pool.fn.addEventSource(
      new sources.DynamoEventSource(this.table, {
        startingPosition: lambda.StartingPosition.LATEST,
        batchSize: 100,
        maxBatchingWindow: Duration.seconds(1),
        bisectBatchOnError: true,
        retryAttempts: 3,
        maxRecordAge: Duration.hours(1),
        reportBatchItemFailures: true,
        onFailure: new sources.SqsDlq(this.deadLetterQueue),
        // Only leases and node items concern the pool; the EC2 rate budget's takes (several per launch) and the
        // reconciler's marks would otherwise each cost an invocation.
        filters: [
          lambda.FilterCriteria.filter({
            dynamodb: { Keys: { [TABLE_KEYS.sortKey]: { S: lambda.FilterRule.beginsWith(LEASE_SORT_PREFIX) } } },
          }),
          lambda.FilterCriteria.filter({
            dynamodb: { Keys: { [TABLE_KEYS.sortKey]: { S: lambda.FilterRule.isEqual(NODE_SORT_KEY) } } },
          }),
        ],
      }),
    );
    this.poolManagerFunction = pool.fn;

    const reconciler = new ControlPlaneFunction(this, 'Reconciler', {
      ...common,
      handler: 'reconciler',
      description: `vpc-lease ${clusterName}: collects leaked ENIs and the leases of gone instances`,
      timeout: RECONCILE_TIMEOUT,
    });
    this.table.grantReadWriteData(reconciler.role);
    for (const s of eniCollectorStatements(this, ec2Scope)) reconciler.role.addToPrincipalPolicy(s);
    this.reconcilerFunction = reconciler.fn;

    // Schedules invoke asynchronously; what fails every retry lands in the same dead-letter queue.
    const scheduled = (fn: lambda.IFunction): targets.LambdaFunction =>
      new targets.LambdaFunction(fn, { deadLetterQueue: this.deadLetterQueue, retryAttempts: 2 });
    new events.Rule(this, 'PoolSchedule', {
      description: `vpc-lease ${clusterName}: pool sweep`,
      schedule: events.Schedule.rate(resolved.poolInterval),
      targets: [scheduled(pool.fn)],
    });
    new events.Rule(this, 'ReconcileSchedule', {
      description: `vpc-lease ${clusterName}: reconcile EC2 with the lease table`,
      schedule: events.Schedule.rate(resolved.reconcileInterval),
      targets: [scheduled(reconciler.fn)],
    });

    this.nodePolicy = createNodePolicy(this, 'NodePolicy', {
      tableArn: this.table.tableArn,
      vpcId: resolved.vpcId,
      clusterName,
    });
    for (const role of props.nodeRoles ?? []) this.nodePolicy.attachToRole(role);

    this.monitoring = new Monitoring(this, 'Monitoring', {
      clusterName,
      queue: this.queue,
      deadLetterQueue: this.deadLetterQueue,
      functions: { InstanceLifecycle: lifecycle.fn, PoolManager: pool.fn, Reconciler: reconciler.fn },
      alarmActions: props.alarmActions ?? [],
    });
    this.accountErrorAlarm = accountErrorAlarm(this, 'AccountErrorsAlarm', {
      clusterName,
      alarmActions: props.alarmActions ?? [],
    });

    if (props.nodeImageUri !== undefined)
      this.nodeImage = new VpcLeaseNodeImage(this, 'NodeImage', { imageUri: props.nodeImageUri });

    suppressAllocatorFindings(this);
  }
}
