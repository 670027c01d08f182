import { ArnFormat, Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import type { Construct } from 'constructs';
import { ASG_NAME_TAG_KEY, CLUSTER_TAG_KEY } from './eni-tags.js';

export interface Ec2Scope {
  readonly clusterName: string;
  readonly vpcId: string;
  /** Instances of these groups may receive ENIs; empty means any instance in the Region. */
  readonly groupNames: readonly string[];
  /** With launches without a hook: instances carrying this tag (any value) may receive ENIs too. */
  readonly instanceTagKey?: string;
}

/** EC2 reads the control plane needs. Describe* has no resource-level permissions: `*`, this Region only. */
export const EC2_DESCRIBE_ACTIONS = [
  'ec2:DescribeInstances',
  'ec2:DescribeInstanceTypes',
  'ec2:DescribeNetworkInterfaces',
  'ec2:DescribeSubnets',
] as const;

/** What may be done to an ENI of this cluster once it exists. */
export const EC2_ENI_MUTATIONS = [
  'ec2:AttachNetworkInterface',
  'ec2:DetachNetworkInterface',
  'ec2:ModifyNetworkInterfaceAttribute',
  'ec2:AssignPrivateIpAddresses',
  'ec2:UnassignPrivateIpAddresses',
  'ec2:AssignIpv6Addresses',
  'ec2:UnassignIpv6Addresses',
  'ec2:DeleteNetworkInterface',
] as const;

function ec2Arn(scope: Construct, resource: string): string {
  return Stack.of(scope).formatArn({
    service: 'ec2',
    resource,
    resourceName: '*',
    arnFormat: ArnFormat.SLASH_RESOURCE_NAME,
  });
}

function describeStatement(scope: Construct): iam.PolicyStatement {
  return new iam.PolicyStatement({
    sid: 'DescribeInRegion',
    actions: [...EC2_DESCRIBE_ACTIONS],
    resources: ['*'],
    conditions: { StringEquals: { 'aws:RequestedRegion': Stack.of(scope).region } },
  });
}

function clusterEniCondition(scope: Ec2Scope): Record<string, unknown> {
  return { StringEquals: { [`ec2:ResourceTag/${CLUSTER_TAG_KEY}`]: scope.clusterName } };
}

/**
 * For instance-lifecycle and pool-manager: create ENIs only tagged for this cluster (tag on create), in this
 * VPC's subnets and groups; touch only ENIs carrying the cluster tag; attach only to instances of the groups.
 */
export function eniManagerStatements(construct: Construct, scope: Ec2Scope): iam.PolicyStatement[] {
  const eniArn = ec2Arn(construct, 'network-interface');
  const vpcArn = Stack.of(construct).formatArn({
    service: 'ec2',
    resource: 'vpc',
    resourceName: scope.vpcId,
    arnFormat: ArnFormat.SLASH_RESOURCE_NAME,
  });
  // Statements OR together: an instance of one of the groups, or one with the cluster tag (hook-less launches).
  const instanceConditions: [string, Record<string, unknown>][] = [];
  if (scope.groupNames.length > 0)
    instanceConditions.push([
      'AttachToGroupInstance',
      { StringEquals: { [`ec2:ResourceTag/${ASG_NAME_TAG_KEY}`]: [...scope.groupNames] } },
    ]);
  if (scope.instanceTagKey)
    instanceConditions.push([
      'AttachToClusterTaggedInstance',
      { Null: { [`ec2:ResourceTag/${scope.instanceTagKey}`]: 'false' } },
    ]);
  const attach = (sid: string, conditions?: Record<string, unknown>): iam.PolicyStatement =>
    new iam.PolicyStatement({
      sid,
      actions: ['ec2:AttachNetworkInterface', 'ec2:DetachNetworkInterface', 'ec2:ModifyNetworkInterfaceAttribute'],
      resources: [ec2Arn(construct, 'instance')],
      ...(conditions ? { conditions } : {}),
    });
  return [
    describeStatement(construct),
    new iam.PolicyStatement({
      sid: 'CreateClusterEni',
      actions: ['ec2:CreateNetworkInterface'],
      resources: [eniArn],
      conditions: { StringEquals: { [`aws:RequestTag/${CLUSTER_TAG_KEY}`]: scope.clusterName } },
    }),
    new iam.PolicyStatement({
      sid: 'CreateEniInClusterVpc',
      actions: ['ec2:CreateNetworkInterface', 'ec2:ModifyNetworkInterfaceAttribute'],
      resources: [ec2Arn(construct, 'subnet'), ec2Arn(construct, 'security-group')],
      conditions: { ArnEquals: { 'ec2:Vpc': vpcArn } },
    }),
    new iam.PolicyStatement({
      sid: 'TagEniOnCreate',
      actions: ['ec2:CreateTags'],
      resources: [eniArn],
      conditions: { StringEquals: { 'ec2:CreateAction': 'CreateNetworkInterface' } },
    }),
    new iam.PolicyStatement({
      sid: 'MutateClusterEni',
      actions: [...EC2_ENI_MUTATIONS],
      resources: [eniArn],
      conditions: clusterEniCondition(scope),
    }),
    ...(instanceConditions.length === 0
      ? [attach('AttachToGroupInstance')]
      : instanceConditions.map(([sid, conditions]) => attach(sid, conditions))),
  ];
}

/**
 * For the reconciler: delete leaked ENIs of this cluster and mark them between its two passes with tags; it
 * can never change the cluster tag itself (so it cannot move an ENI out of, or into, this cluster's scope).
 */
export function eniCollectorStatements(construct: Construct, scope: Ec2Scope): iam.PolicyStatement[] {
  const eniArn = ec2Arn(construct, 'network-interface');
  return [
    describeStatement(construct),
    new iam.PolicyStatement({
      sid: 'DeleteClusterEni',
      actions: ['ec2:DeleteNetworkInterface'],
      resources: [eniArn],
      conditions: clusterEniCondition(scope),
    }),
    new iam.PolicyStatement({
      sid: 'MarkClusterEni',
      actions: ['ec2:CreateTags', 'ec2:DeleteTags'],
      resources: [eniArn],
      conditions: {
        StringEquals: { [`ec2:ResourceTag/${CLUSTER_TAG_KEY}`]: scope.clusterName },
        'ForAllValues:StringNotEquals': { 'aws:TagKeys': [CLUSTER_TAG_KEY] },
      },
    }),
  ];
}

/** Complete and heartbeat lifecycle actions of exactly the attached groups. */
export function lifecycleActionStatements(construct: Construct, groupNames: readonly string[]): iam.PolicyStatement[] {
  if (groupNames.length === 0) return [];
  return [
    new iam.PolicyStatement({
      sid: 'CompleteLifecycleActions',
      actions: ['autoscaling:CompleteLifecycleAction', 'autoscaling:RecordLifecycleActionHeartbeat'],
      resources: groupNames.map((name) =>
        Stack.of(construct).formatArn({
          service: 'autoscaling',
          resource: 'autoScalingGroup',
          resourceName: `*:autoScalingGroupName/${name}`,
          arnFormat: ArnFormat.COLON_RESOURCE_NAME,
        }),
      ),
    }),
  ];
}
