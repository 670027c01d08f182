import { CfnOutput, CfnParameter, Stack, type StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { VpcLeaseAllocator } from './allocator.js';
import type { VpcLeaseAllocatorProps } from './props.js';

export interface VpcLeaseStackProps extends StackProps {
  /** The allocator's props; without a VPC the stack takes it as the `VpcId` parameter at deploy time. */
  readonly allocator: Omit<VpcLeaseAllocatorProps, 'vpc'> & Partial<Pick<VpcLeaseAllocatorProps, 'vpc'>>;
}

/** The deployable unit `infra/app.ts` synthesises: one allocator and the outputs a cluster operator needs. */
export class VpcLeaseStack extends Stack {
  readonly allocator: VpcLeaseAllocator;

  constructor(scope: Construct, id: string, props: VpcLeaseStackProps) {
    super(scope, id, props);
    const vpc =
      props.allocator.vpc ??
      new CfnParameter(this, 'VpcId', {
        type: 'AWS::EC2::VPC::Id',
        description: 'The VPC of the cluster nodes (it needs a DynamoDB gateway endpoint)',
      }).valueAsString;
    this.allocator = new VpcLeaseAllocator(this, 'Allocator', { ...props.allocator, vpc });
    new CfnOutput(this, 'TableName', {
      value: this.allocator.table.tableName,
      description: 'The lease table: the tableName of config.json in the vpc-lease-cni ConfigMap',
    });
    new CfnOutput(this, 'NodePolicyArn', {
      value: this.allocator.nodePolicy.managedPolicyArn,
      description: 'Attach to the instance role of the cluster nodes',
    });
    new CfnOutput(this, 'QueueUrl', { value: this.allocator.queue.queueUrl });
    new CfnOutput(this, 'DeadLetterQueueUrl', { value: this.allocator.deadLetterQueue.queueUrl });
    new CfnOutput(this, 'DashboardName', { value: this.allocator.monitoring.dashboard.dashboardName });
  }
}
