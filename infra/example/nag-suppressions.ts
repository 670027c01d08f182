import { Validations } from 'aws-cdk-lib';
import type * as autoscaling from 'aws-cdk-lib/aws-autoscaling';
import type * as iam from 'aws-cdk-lib/aws-iam';

/** The trial stack's own findings, each acknowledged on the one construct it concerns. */
export function suppressTrialFindings(nodeRole: iam.Role, group: autoscaling.AutoScalingGroup): void {
  Validations.of(nodeRole).acknowledge({
    id: 'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonSSMManagedInstanceCore]',
    reason: 'Trial nodes are reached through Session Manager instead of SSH; AWS maintains the policy it needs.',
  });
  Validations.of(group).acknowledge({
    id: 'AwsSolutions-AS3',
    reason:
      'A throwaway trial group with no one subscribed to scaling notifications; vpc-lease reports abandoned ' +
      'launches through its own alarm.',
  });
}
