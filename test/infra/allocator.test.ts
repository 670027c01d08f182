import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import { Annotations, Capture, Match, type Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { QUEUE_URL_ENV } from '../../infra/construct/allocator.js';
import { hookNames } from '../../infra/construct/lifecycle-events.js';
import { CLUSTER_DIMENSION, METRIC_NAMES, METRIC_NAMESPACE } from '../../infra/construct/metrics.js';
import { QUEUE_URL_ENV as LIFECYCLE_QUEUE_URL_ENV } from '../../lambdas/instance-lifecycle/deps.js';
import { controlPlaneConfigFromEnv } from '../../shared/config/control-plane.js';
import { parseEc2Buckets } from '../../shared/ec2/account-buckets.js';
import { EC2_BUCKETS_ENV } from '../../shared/ec2/budget-env.js';
import { CLAIMABLE_INDEX, createTableInput, NODE_INDEX, TABLE_KEYS } from '../../shared/lease-store/table.js';
import { METRIC_NAMES as EMITTED } from '../../shared/metrics.js';
import { onlyLogicalId, synthAllocator } from './support/stacks.js';

type Resource = { Properties: Record<string, unknown> } & Record<string, unknown>;

function functionsByDescription(template: Template): Map<string, Resource> {
  const out = new Map<string, Resource>();
  for (const r of Object.values(template.findResources('AWS::Lambda::Function')) as Resource[]) {
    const d = String(r.Properties.Description);
    const name = ['instance-lifecycle', 'pool-manager', 'reconciler'].find((n) =>
      d.includes(
        { 'instance-lifecycle': 'launch and terminate', 'pool-manager': 'watermarks', reconciler: 'leaked' }[n]!,
      ),
    );
    if (name) out.set(name, r);
  }
  return out;
}

describe('Construct: VpcLeaseAllocator', () => {
  let template: Template;
  let functions: Map<string, Resource>;
  let tableId: string;

  beforeAll(() => {
    // Prepare: one synthesis shared by every assertion of this file.
    ({ template } = synthAllocator({
      podSubnets: ['subnet-0aaaaaaaaaaaaaaaa'],
      securityGroups: ['sg-0bbbbbbbbbbbbbbbb'],
      maxConcurrency: 7,
      warmLowLeases: 2,
      warmHighLeases: 9,
    }));
    functions = functionsByDescription(template);
    tableId = onlyLogicalId(template, 'AWS::DynamoDB::Table');
  });

  describe('lease table', () => {
    it('declares exactly the keys, index and stream of the shared table shape', () => {
      const shape = createTableInput('x');
      template.hasResourceProperties('AWS::DynamoDB::Table', {
        KeySchema: shape.KeySchema,
        LocalSecondaryIndexes: [
          Match.objectLike({
            IndexName: CLAIMABLE_INDEX.name,
            KeySchema: [
              { AttributeName: TABLE_KEYS.partitionKey, KeyType: 'HASH' },
              { AttributeName: CLAIMABLE_INDEX.sortKey, KeyType: 'RANGE' },
            ],
            Projection: { ProjectionType: 'ALL' },
          }),
        ],
        // The one global index is the node index, keyed on an attribute only the control plane writes (issue 25).
        GlobalSecondaryIndexes: [
          Match.objectLike({
            IndexName: NODE_INDEX.name,
            KeySchema: [
              { AttributeName: NODE_INDEX.partitionKey, KeyType: 'HASH' },
              { AttributeName: NODE_INDEX.sortKey, KeyType: 'RANGE' },
            ],
            Projection: { ProjectionType: 'INCLUDE', NonKeyAttributes: [...NODE_INDEX.projected] },
          }),
        ],
        StreamSpecification: { StreamViewType: 'NEW_AND_OLD_IMAGES' },
      });
      const defs = template.findResources('AWS::DynamoDB::Table')[tableId]?.Properties.AttributeDefinitions;
      expect(defs).toHaveLength(4);
      expect(defs).toEqual(expect.arrayContaining(shape.AttributeDefinitions ?? []));
      expect(TABLE_KEYS.partitionKey).toBe(shape.KeySchema?.[0]?.AttributeName);
    });

    it('is a new resource for schema generation 2, so CloudFormation creates it instead of updating in place', () => {
      // An index kind cannot change in place: a new logical id and, when named, a new physical name.
      expect(tableId).toMatch(/^AllocatorLeasesV2[0-9A-F]{8}$/);
      const named = synthAllocator({ tableName: 'prod-1-leases' }).template;
      named.hasResourceProperties('AWS::DynamoDB::Table', { TableName: 'prod-1-leases-v2' });
      expect(onlyLogicalId(named, 'AWS::DynamoDB::Table')).toBe(tableId);
      // Negative control: generation 1 had the global index under the id without a version.
      expect(
        Object.keys(template.findResources('AWS::DynamoDB::Table')).some((id) => /Leases[0-9A-F]{8}$/.test(id)),
      ).toBe(false);
    });

    it('is on-demand, encrypted with KMS, point-in-time recoverable and retained by default', () => {
      template.hasResource('AWS::DynamoDB::Table', {
        Properties: Match.objectLike({
          BillingMode: 'PAY_PER_REQUEST',
          PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
          SSESpecification: { SSEEnabled: true },
          DeletionProtectionEnabled: true,
        }),
        DeletionPolicy: 'Retain',
        UpdateReplacePolicy: 'Retain',
      });
    });
  });

  describe('queue', () => {
    it('has an encrypted, TLS-only queue whose visibility is at least 6x the lifecycle timeout', () => {
      const lifecycleTimeoutS = functions.get('instance-lifecycle')?.Properties.Timeout as number;
      expect(lifecycleTimeoutS).toBeGreaterThan(0);
      const visibility = new Capture();
      template.hasResourceProperties('AWS::SQS::Queue', {
        SqsManagedSseEnabled: true,
        VisibilityTimeout: visibility,
        RedrivePolicy: { deadLetterTargetArn: Match.anyValue(), maxReceiveCount: 5 },
      });
      expect(visibility.asNumber()).toBeGreaterThanOrEqual(6 * lifecycleTimeoutS);
      template.resourceCountIs('AWS::SQS::Queue', 2);
      template.resourcePropertiesCountIs('AWS::SQS::Queue', { SqsManagedSseEnabled: true }, 2);
      template.resourcePropertiesCountIs(
        'AWS::SQS::QueuePolicy',
        {
          PolicyDocument: {
            Statement: Match.arrayWith([
              Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
            ]),
          },
        },
        2,
      );
    });
  });

  describe('lifecycle hooks and rules', () => {
    it('adds a launch (ABANDON on timeout) and a terminate hook to each attached group', () => {
      const names = hookNames('prod-1');
      template.resourceCountIs('AWS::AutoScaling::LifecycleHook', 4);
      for (const group of ['nodes-a', 'nodes-b']) {
        template.hasResourceProperties('AWS::AutoScaling::LifecycleHook', {
          AutoScalingGroupName: group,
          LifecycleHookName: names.launch,
          LifecycleTransition: 'autoscaling:EC2_INSTANCE_LAUNCHING',
          DefaultResult: 'ABANDON',
          HeartbeatTimeout: 300,
        });
        template.hasResourceProperties('AWS::AutoScaling::LifecycleHook', {
          AutoScalingGroupName: group,
          LifecycleHookName: names.terminate,
          LifecycleTransition: 'autoscaling:EC2_INSTANCE_TERMINATING',
          DefaultResult: 'CONTINUE',
        });
      }
    });

    it('routes lifecycle actions of exactly the attached groups and hooks, and EC2 terminations, to the queue', () => {
      const names = hookNames('prod-1');
      const queueArn = { 'Fn::GetAtt': [Match.stringLikeRegexp('QueueEvents'), 'Arn'] };
      template.hasResourceProperties('AWS::Events::Rule', {
        EventPattern: {
          source: ['aws.autoscaling'],
          'detail-type': ['EC2 Instance-launch Lifecycle Action', 'EC2 Instance-terminate Lifecycle Action'],
          detail: { AutoScalingGroupName: ['nodes-a', 'nodes-b'], LifecycleHookName: [names.launch, names.terminate] },
        },
        Targets: [Match.objectLike({ Arn: queueArn, DeadLetterConfig: Match.anyValue() })],
      });
      template.hasResourceProperties('AWS::Events::Rule', {
        EventPattern: {
          source: ['aws.ec2'],
          'detail-type': ['EC2 Instance State-change Notification'],
          detail: { state: ['terminated'] },
        },
        Targets: [Match.objectLike({ Arn: queueArn })],
      });
    });

    it('schedules the pool-manager every minute and the reconciler every five, failures to the DLQ', () => {
      template.hasResourceProperties('AWS::Events::Rule', {
        ScheduleExpression: 'rate(1 minute)',
        Targets: [Match.objectLike({ DeadLetterConfig: Match.anyValue(), RetryPolicy: { MaximumRetryAttempts: 2 } })],
      });
      template.hasResourceProperties('AWS::Events::Rule', { ScheduleExpression: 'rate(5 minutes)' });
    });
  });

  describe('functions', () => {
    it('deploys three arm64 Node 24 functions with tracing, JSON logs and a log group with a retention each', () => {
      expect([...functions.keys()].sort()).toEqual(['instance-lifecycle', 'pool-manager', 'reconciler']);
      for (const fn of functions.values()) {
        expect(fn.Properties).toMatchObject({
          Runtime: 'nodejs24.x',
          Architectures: ['arm64'],
          TracingConfig: { Mode: 'Active' },
          LoggingConfig: { LogFormat: 'JSON', LogGroup: { Ref: expect.any(String) } },
          Handler: 'index.handler',
        });
      }
      template.resourceCountIs('AWS::Logs::LogGroup', 3);
      template.allResourcesProperties('AWS::Logs::LogGroup', { RetentionInDays: 30 });
    });

    it('writes the validated configuration into each function, readable by the Lambdas’ own parser', () => {
      for (const [name, fn] of functions) {
        const vars = (fn.Properties.Environment as { Variables: Record<string, unknown> }).Variables;
        expect(vars.VPC_LEASE_TABLE_NAME).toEqual({ Ref: tableId });
        const literal = Object.fromEntries(
          Object.entries(vars).map(([k, v]) => [k, typeof v === 'string' ? v : 'resolved-at-deploy']),
        );
        const config = controlPlaneConfigFromEnv(literal);
        expect(config).toMatchObject({
          clusterName: 'prod-1',
          podSubnetIds: ['subnet-0aaaaaaaaaaaaaaaa'],
          securityGroupIds: ['sg-0bbbbbbbbbbbbbbbb'],
          warmLowLeases: 2,
          warmHighLeases: 9,
          ipFamily: 'ipv4',
        });
        expect(vars.VPC_LEASE_IP_FAMILY).toBe('ipv4');
        expect(QUEUE_URL_ENV in vars).toBe(name === 'instance-lifecycle');
      }
    });

    it('names the queue URL variable as the lifecycle Lambda reads it', () => {
      expect(QUEUE_URL_ENV).toBe(LIFECYCLE_QUEUE_URL_ENV);
    });

    it('feeds the lifecycle function from SQS with partial batch failures and the concurrency cap', () => {
      template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
        EventSourceArn: { 'Fn::GetAtt': [Match.stringLikeRegexp('QueueEvents'), 'Arn'] },
        FunctionResponseTypes: ['ReportBatchItemFailures'],
        ScalingConfig: { MaximumConcurrency: 7 },
      });
    });

    it('feeds the pool-manager from the table stream with bisect, bounded retries and a failure destination', () => {
      template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
        EventSourceArn: { 'Fn::GetAtt': [tableId, 'StreamArn'] },
        BisectBatchOnFunctionError: true,
        MaximumRetryAttempts: 3,
        FunctionResponseTypes: ['ReportBatchItemFailures'],
        DestinationConfig: { OnFailure: { Destination: Match.anyValue() } },
        StartingPosition: 'LATEST',
        // Lease and node items only: the rate budget's and the reconciler's items never invoke the pool.
        FilterCriteria: {
          Filters: [
            { Pattern: JSON.stringify({ dynamodb: { Keys: { sk: { S: [{ prefix: 'ip#' }] } } } }) },
            { Pattern: JSON.stringify({ dynamodb: { Keys: { sk: { S: ['node'] } } } }) },
          ],
        },
      });
      template.resourceCountIs('AWS::Lambda::EventSourceMapping', 2);
    });

    it('gives each function its own role without AWS managed policies', () => {
      const roles = Object.values(template.findResources('AWS::IAM::Role')) as Resource[];
      expect(roles).toHaveLength(3);
      for (const role of roles) expect(role.Properties.ManagedPolicyArns).toBeUndefined();
    });
  });

  describe('alarms and dashboard', () => {
    it('alarms when the dead-letter queue is not empty', () => {
      template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        MetricName: 'ApproximateNumberOfMessagesVisible',
        Namespace: 'AWS/SQS',
        Threshold: 1,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        Dimensions: [
          { Name: 'QueueName', Value: { 'Fn::GetAtt': [Match.stringLikeRegexp('DeadLetters'), 'QueueName'] } },
        ],
      });
    });

    it('alarms on nodes low on claimable leases with the dimensions the pool-manager emits', () => {
      const dimensions = new Capture();
      template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        Namespace: METRIC_NAMESPACE,
        MetricName: METRIC_NAMES.nodesLowOnLeases,
        Dimensions: dimensions,
        EvaluationPeriods: 3,
        TreatMissingData: 'notBreaching',
      });
      // A metric is identified by its whole dimension set (order does not matter): exactly these two.
      expect(new Set(dimensions.asArray())).toEqual(
        new Set([
          { Name: 'Service', Value: 'pool-manager' },
          { Name: CLUSTER_DIMENSION, Value: 'prod-1' },
        ]),
      );
    });

    it('alarms on a partition the census left unread for its size, with the dimensions the reconciler emits', () => {
      const dimensions = new Capture();
      template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        Namespace: METRIC_NAMESPACE,
        MetricName: METRIC_NAMES.oversizedPartitions,
        Dimensions: dimensions,
        Threshold: 1,
        EvaluationPeriods: 1,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        TreatMissingData: 'notBreaching',
      });
      expect(METRIC_NAMES.oversizedPartitions).toBe(EMITTED.reconcilerOversizedPartitions);
      expect(new Set(dimensions.asArray())).toEqual(
        new Set([
          { Name: 'Service', Value: 'reconciler' },
          { Name: CLUSTER_DIMENSION, Value: 'prod-1' },
        ]),
      );
    });

    it('alarms on abandoned launches and EC2 throttling over every dimension set of this cluster only', () => {
      const abandoned = new Capture();
      template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        Metrics: [Match.objectLike({ Expression: abandoned, Period: 300, ReturnData: true })],
        Threshold: 1,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      });
      const expressions = (Object.values(template.findResources('AWS::CloudWatch::Alarm')) as Resource[])
        .flatMap((a) => (a.Properties.Metrics as { Expression?: string }[] | undefined) ?? [])
        .map((m) => m.Expression);
      // The names are the ones the Lambdas emit (shared/metrics.ts), and each query is scoped to the cluster:
      // another cluster's abandoned launches or throttling in the same account must not trip these alarms.
      expect(METRIC_NAMES.launchesAbandoned).toBe(EMITTED.launchAbandoned);
      expect(METRIC_NAMES.ec2Errors).toBe(EMITTED.ec2Errors);
      expect(expressions).toContain(
        `SELECT SUM(LaunchAbandoned) FROM "${METRIC_NAMESPACE}" WHERE ${CLUSTER_DIMENSION} = 'prod-1'`,
      );
      expect(expressions).toContain(
        `SELECT SUM(Ec2Errors) FROM "${METRIC_NAMESPACE}" WHERE ${CLUSTER_DIMENSION} = 'prod-1' AND Kind = 'throttling'`,
      );
      // Errors that are not a node's fault are retried without end, so they alarm at the first one.
      expect(expressions).toContain(
        `SELECT SUM(Ec2Errors) FROM "${METRIC_NAMESPACE}" WHERE ${CLUSTER_DIMENSION} = 'prod-1' AND Kind = 'account'`,
      );
      // Invariant 8: a lease a node wrote and the control plane refused pages someone.
      expect(METRIC_NAMES.untrustedLeasesRejected).toBe(EMITTED.untrustedLeaseRejected);
      expect(expressions).toContain(
        `SELECT SUM(UntrustedLeaseRejected) FROM "${METRIC_NAMESPACE}" WHERE ${CLUSTER_DIMENSION} = 'prod-1'`,
      );
      // Full subnets: every refusal, and apart the launches no subnet could hold (the reason abandon.ts writes).
      expect(METRIC_NAMES.subnetFull).toBe(EMITTED.subnetFull);
      expect(expressions).toContain(
        `SELECT SUM(SubnetFull) FROM "${METRIC_NAMESPACE}" WHERE ${CLUSTER_DIMENSION} = 'prod-1'`,
      );
      expect(expressions).toContain(
        `SELECT SUM(LaunchAbandoned) FROM "${METRIC_NAMESPACE}" WHERE ${CLUSTER_DIMENSION} = 'prod-1' AND Reason = 'subnets-exhausted'`,
      );
      for (const expression of expressions) expect(expression).toMatch(/WHERE ClusterName = 'prod-1'/);
      // DLQ + five custom + two subnet + account errors + one errors alarm per function.
      template.resourceCountIs('AWS::CloudWatch::Alarm', 12);
    });

    it('builds one dashboard showing the alarms and the custom metrics', () => {
      template.resourceCountIs('AWS::CloudWatch::Dashboard', 1);
      const body = JSON.stringify(
        (Object.values(template.findResources('AWS::CloudWatch::Dashboard'))[0] as Resource).Properties.DashboardBody,
      );
      for (const metric of Object.values(METRIC_NAMES)) expect(body).toContain(metric);
      expect(body).toContain('alarm');
    });
  });
});

describe('Construct: VpcLeaseAllocator options', () => {
  it('lets the table be destroyed and unprotected when the removal policy says so', () => {
    const { template } = synthAllocator({ removalPolicy: RemovalPolicy.DESTROY, autoScalingGroups: [] });
    template.hasResource('AWS::DynamoDB::Table', {
      DeletionPolicy: 'Delete',
      Properties: Match.objectLike({ DeletionProtectionEnabled: false }),
    });
  });

  it('warns when a failed launch record would be redelivered only after its hook expired', () => {
    const short = synthAllocator({ heartbeatTimeout: Duration.seconds(120) });
    Annotations.fromStack(short.stack).hasWarning(
      '*',
      Match.stringLikeRegexp('heartbeatTimeout \\(120 s\\) is not longer'),
    );
    const fine = synthAllocator();
    Annotations.fromStack(fine.stack).hasNoWarning('*', Match.stringLikeRegexp('heartbeatTimeout'));
  });

  it('tells every function the account’s raised EC2 buckets in the form the budget parses, and none by default', () => {
    const raised = { AttachNetworkInterface: { bucket: 100, refillPerSecond: 10 } };
    const variables = (template: Template) =>
      Object.values(template.findResources('AWS::Lambda::Function')).map(
        (fn) => (fn.Properties.Environment as { Variables: Record<string, unknown> }).Variables,
      );
    const withBuckets = variables(synthAllocator({ ec2Buckets: raised }).template);
    expect(withBuckets).toHaveLength(3);
    for (const vars of withBuckets)
      expect(parseEc2Buckets(String(vars[EC2_BUCKETS_ENV]), EC2_BUCKETS_ENV)).toEqual(raised);
    for (const vars of variables(synthAllocator().template)) expect(EC2_BUCKETS_ENV in vars).toBe(false);
  });

  it('deploys ipFamily ipv6 and dual: the Lambdas read the family, and their role may assign IPv6', () => {
    for (const ipFamily of ['ipv6', 'dual'] as const) {
      const { template } = synthAllocator({ ipFamily });
      const fns = Object.values(template.findResources('AWS::Lambda::Function'));
      expect(fns).toHaveLength(3);
      for (const fn of fns)
        expect(
          (fn.Properties.Environment as { Variables: Record<string, unknown> }).Variables.VPC_LEASE_IP_FAMILY,
        ).toBe(ipFamily);
      expect(JSON.stringify(template.toJSON())).toContain('ec2:AssignIpv6Addresses');
    }
  });

  it('refuses an unknown ipFamily before building anything', () => {
    expect(() => synthAllocator({ ipFamily: 'ipv7' as 'ipv6' })).toThrow(/ipFamily: must be one of ipv4, ipv6, dual/);
  });

  it('creates no hooks and no lifecycle rule but still the terminated rule when no group is attached', () => {
    const { template } = synthAllocator({ autoScalingGroups: [] });
    template.resourceCountIs('AWS::AutoScaling::LifecycleHook', 0);
    template.resourcePropertiesCountIs('AWS::Events::Rule', { EventPattern: { source: ['aws.autoscaling'] } }, 0);
    template.resourcePropertiesCountIs('AWS::Events::Rule', { EventPattern: { source: ['aws.ec2'] } }, 1);
  });
});
