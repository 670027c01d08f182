import * as iam from 'aws-cdk-lib/aws-iam';
import type { Construct } from 'constructs';
import { CLAIMABLE_INDEX } from '../../shared/lease-store/table.js';

/** The only calls a node makes: single-item reads and conditional writes, and a Query of its claimable leases. */
export const NODE_TABLE_ACTIONS = [
  'dynamodb:GetItem',
  'dynamodb:Query',
  'dynamodb:UpdateItem',
  'dynamodb:PutItem',
  'dynamodb:DeleteItem',
] as const;

/** The IAM policy variable that holds the calling instance's ARN (instance-profile credentials only). */
// biome-ignore lint/suspicious/noTemplateCurlyInString: an IAM policy variable, literally `${…}`, not a JS template.
export const SOURCE_INSTANCE_ARN_VARIABLE = '${ec2:SourceInstanceARN}';

export interface NodePolicyProps {
  readonly tableArn: string;
  readonly vpcId: string;
  readonly clusterName: string;
}

/**
 * The policy for the cluster's instance role (DESIGN invariant 7): a node reads and writes only the items whose
 * partition key is its own instance ARN, on the table and its claimable index (whose partition key is the same
 * ARN), only from inside the cluster's VPC through a DynamoDB gateway endpoint — no Scan, no EC2.
 */
export function createNodePolicy(scope: Construct, id: string, props: NodePolicyProps): iam.ManagedPolicy {
  return new iam.ManagedPolicy(scope, id, {
    description: `vpc-lease ${props.clusterName}: a node's own lease partition only`,
    statements: [
      new iam.PolicyStatement({
        sid: 'OwnPartitionOnly',
        actions: [...NODE_TABLE_ACTIONS],
        resources: [props.tableArn, `${props.tableArn}/index/${CLAIMABLE_INDEX.name}`],
        conditions: {
          // ForAllValues over an empty set is true; the Null clause makes a request without keys fail.
          'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': [SOURCE_INSTANCE_ARN_VARIABLE] },
          Null: { 'dynamodb:LeadingKeys': 'false' },
          StringEquals: { 'aws:SourceVpc': props.vpcId },
        },
      }),
    ],
  });
}
