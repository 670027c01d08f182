import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as ec2 from 'aws-cdk-lib/aws-ec2';
import type { Construct } from 'constructs';
import type { ControlPlaneConfig } from '../../shared/config/control-plane.js';
import { loadInstanceTypes } from '../../shared/data/catalog.js';
import { launchTemplateEniTags } from '../../shared/ec2/tags.js';
import { PlanError } from '../../shared/planner/errors.js';
import { planTemplateEnis } from '../../shared/planner/template-plan.js';
import { clusterSumQuery, KIND_DIMENSION, METRIC_NAMES } from './metrics.js';
import { AllocatorPropsError } from './props.js';

/**
 * The allocator's scale-out parts: the pod ENIs a node group's launch template can declare (adopted by the lifecycle
 * Lambda with no mutating EC2 call), and the alarm on EC2 errors that are not a node's fault.
 */

export interface PodEniLaunchTemplateOptions {
  /** The node group's instance type: its ENI and address limits size the plan (one template per type). */
  readonly instanceType: string;
  /** Security groups of the node's boot ENI (a template with NetworkInterfaces cannot also set them at top level). */
  readonly nodeSecurityGroups: readonly (ec2.ISecurityGroup | string)[];
  /**
   * A pod subnet for the pod ENIs. It pins the group to that subnet's AZ: every ENI of an instance must be in one AZ.
   * @default the subnet Auto Scaling picks for the instance (the boot subnet)
   */
  readonly podSubnet?: ec2.ISubnet | string;
  /**
   * Give the allocator's `securityGroups` here when it has them, so adopted and created pod ENIs match.
   * @default `nodeSecurityGroups` (pods look like the node, as create-and-attach does without `securityGroups`)
   */
  readonly podSecurityGroups?: readonly (ec2.ISecurityGroup | string)[];
}

/** What goes into the node group's `CfnLaunchTemplate` LaunchTemplateData. */
export interface PodEniLaunchTemplateData {
  readonly networkInterfaces: ec2.CfnLaunchTemplate.NetworkInterfaceProperty[];
  readonly tagSpecifications: ec2.CfnLaunchTemplate.TagSpecificationProperty[];
}

const idOf = (x: { subnetId: string } | { securityGroupId: string } | string): string =>
  typeof x === 'string' ? x : 'subnetId' in x ? x.subnetId : x.securityGroupId;

/**
 * The launch template's NetworkInterfaces for pod ENIs of an allocator's cluster (its config sizes them): the boot ENI at device index 0, then the pod ENIs at
 * 1..n with the very plan a launch makes (shared/planner), DeleteOnTermination, and the network-interface tags
 * the Lambdas and the reconciler look for. EC2 creates and attaches them at RunInstances; the lifecycle Lambda
 * only adopts them. See docs/DEPLOY.md "Pod ENIs in the launch template" for the host-side consequences
 * (no auto-assigned public IPv4, DHCP on the extra interfaces).
 */
export function podEniLaunchTemplateData(
  allocator: { readonly config: ControlPlaneConfig },
  options: PodEniLaunchTemplateOptions,
): PodEniLaunchTemplateData {
  const { config } = allocator;
  const limits = loadInstanceTypes().get(options.instanceType);
  if (!limits)
    throw new AllocatorPropsError(`podEniLaunchTemplateData: unknown instance type ${options.instanceType}`, [
      `instanceType: ${options.instanceType} is not in shared/data/ec2-instance-types.json`,
    ]);
  const nodeGroups = options.nodeSecurityGroups.map(idOf);
  if (nodeGroups.length === 0)
    throw new AllocatorPropsError('podEniLaunchTemplateData: nodeSecurityGroups is empty', [
      'nodeSecurityGroups: give the boot ENI at least one security group',
    ]);
  const podGroups = options.podSecurityGroups?.map(idOf) ?? nodeGroups;
  let plan: ReturnType<typeof planTemplateEnis>;
  try {
    plan = planTemplateEnis({ ...config, limits });
  } catch (err) {
    if (!(err instanceof PlanError)) throw err;
    throw new AllocatorPropsError(`podEniLaunchTemplateData: ${err.message}`, [`instanceType: ${err.message}`]);
  }
  const subnetId = options.podSubnet === undefined ? undefined : idOf(options.podSubnet);
  return {
    networkInterfaces: [
      { deviceIndex: 0, groups: nodeGroups, deleteOnTermination: true },
      ...plan.map((e) => ({
        deviceIndex: e.deviceIndex,
        ...(e.networkCardIndex !== limits.defaultNetworkCardIndex ? { networkCardIndex: e.networkCardIndex } : {}),
        ...(subnetId !== undefined ? { subnetId } : {}),
        ...(e.prefixCount > 0 ? { ipv4PrefixCount: e.prefixCount } : { secondaryPrivateIpAddressCount: e.ipCount }),
        groups: podGroups,
        deleteOnTermination: true,
        description: `vpc-lease ${config.clusterName} pod ENI ${e.deviceIndex}`,
      })),
    ],
    tagSpecifications: [
      {
        resourceType: 'network-interface',
        tags: Object.entries(launchTemplateEniTags(config.clusterName)).map(([key, value]) => ({ key, value })),
      },
    ],
  };
}

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
