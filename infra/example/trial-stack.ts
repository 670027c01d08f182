import { CfnOutput, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import * as autoscaling from 'aws-cdk-lib/aws-autoscaling';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import type { Construct } from 'constructs';
import { VpcLeaseAllocator } from '../construct/allocator.js';
import { suppressTrialFindings } from './nag-suppressions.js';

export interface VpcLeaseTrialStackProps extends StackProps {
  /** @default 'vpc-lease-trial' */
  readonly clusterName?: string;
  /** @default t4g.medium (arm64, 3 ENIs of 6 addresses: two pod ENIs fit beside the boot ENI) */
  readonly instanceType?: string;
  /** The group starts empty (see below); this is its ceiling. @default 3 */
  readonly maxNodes?: number;
  /** The node image `npm run -s push-image` printed; output as NodeImageUri for `npm run daemonset`. @default none */
  readonly nodeImageUri?: string;
}

/**
 * A throwaway trial: a VPC with a DynamoDB gateway endpoint (the node policy's `aws:SourceVpc` needs it), an
 * Auto Scaling group of plain Amazon Linux nodes whose role carries the node policy, and the allocator attached
 * to the group. Everything is destroyed with the stack.
 *
 * The group starts at zero instances on purpose: lifecycle hooks are separate resources that CloudFormation
 * creates after the group, so instances launched with the group would never see the launch hook. Scale it up
 * after the deploy (the `ScaleUp` output).
 */
export class VpcLeaseTrialStack extends Stack {
  readonly vpc: ec2.Vpc;
  readonly group: autoscaling.AutoScalingGroup;
  readonly nodeRole: iam.Role;
  readonly allocator: VpcLeaseAllocator;

  constructor(scope: Construct, id: string, props: VpcLeaseTrialStackProps = {}) {
    super(scope, id, props);
    const clusterName = props.clusterName ?? 'vpc-lease-trial';
    this.vpc = new ec2.Vpc(this, 'Vpc', {
      ipAddresses: ec2.IpAddresses.cidr('10.42.0.0/16'),
      maxAzs: 2,
      natGateways: 1,
      subnetConfiguration: [
        { name: 'public', subnetType: ec2.SubnetType.PUBLIC, cidrMask: 24 },
        // /20: room for pods on extra ENIs in the nodes' own subnet (the default).
        { name: 'nodes', subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS, cidrMask: 20 },
      ],
      gatewayEndpoints: { DynamoDb: { service: ec2.GatewayVpcEndpointAwsService.DYNAMODB } },
      flowLogs: { all: { trafficType: ec2.FlowLogTrafficType.REJECT } },
    });
    this.nodeRole = new iam.Role(this, 'NodeRole', {
      assumedBy: new iam.ServicePrincipal('ec2.amazonaws.com'),
      description: `vpc-lease ${clusterName} trial nodes`,
      // Shell access through Session Manager instead of SSH keys and an open port.
      managedPolicies: [iam.ManagedPolicy.fromAwsManagedPolicyName('AmazonSSMManagedInstanceCore')],
    });
    const securityGroup = new ec2.SecurityGroup(this, 'NodeSecurityGroup', {
      vpc: this.vpc,
      description: `vpc-lease ${clusterName} trial nodes and pods`,
      allowAllOutbound: true,
    });
    securityGroup.addIngressRule(securityGroup, ec2.Port.allTraffic(), 'nodes and pods talk to each other');
    const launchTemplate = new ec2.LaunchTemplate(this, 'NodeTemplate', {
      instanceType: new ec2.InstanceType(props.instanceType ?? 't4g.medium'),
      machineImage: ec2.MachineImage.latestAmazonLinux2023({ cpuType: ec2.AmazonLinuxCpuType.ARM_64 }),
      role: this.nodeRole,
      securityGroup,
      requireImdsv2: true,
      httpPutResponseHopLimit: 2,
      blockDevices: [
        {
          deviceName: '/dev/xvda',
          volume: ec2.BlockDeviceVolume.ebs(20, { encrypted: true, deleteOnTermination: true }),
        },
      ],
    });
    this.group = new autoscaling.AutoScalingGroup(this, 'Nodes', {
      vpc: this.vpc,
      vpcSubnets: { subnetGroupName: 'nodes' },
      launchTemplate,
      minCapacity: 0,
      maxCapacity: props.maxNodes ?? 3,
      healthChecks: autoscaling.HealthChecks.ec2(),
    });
    this.allocator = new VpcLeaseAllocator(this, 'Allocator', {
      clusterName,
      vpc: this.vpc,
      autoScalingGroups: [this.group],
      nodeRoles: [this.nodeRole],
      removalPolicy: RemovalPolicy.DESTROY,
      ...(props.nodeImageUri !== undefined ? { nodeImageUri: props.nodeImageUri } : {}),
    });
    new CfnOutput(this, 'TableName', { value: this.allocator.table.tableName });
    new CfnOutput(this, 'ScaleUp', {
      value: `aws autoscaling set-desired-capacity --auto-scaling-group-name ${this.group.autoScalingGroupName} --desired-capacity 1`,
      description: 'Launch a node through the hooks, then look at its leases',
    });
    suppressTrialFindings(this.nodeRole, this.group);
  }
}
