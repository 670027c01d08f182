import * as iam from 'aws-cdk-lib/aws-iam';
import type { Construct } from 'constructs';
import { NODE_WRITABLE_ATTRS } from '../../shared/lease-store/item-codec.js';
import { CLAIMABLE_INDEX } from '../../shared/lease-store/table.js';

/** A node's reads: GetItem of one own item, Query of its own partition or of its claimable index. */
export const NODE_READ_ACTIONS = ['dynamodb:GetItem', 'dynamodb:Query'] as const;
/** A node's only write: the conditional UpdateItem of a claim or a release. No PutItem, no DeleteItem. */
export const NODE_WRITE_ACTIONS = ['dynamodb:UpdateItem'] as const;
/** Every DynamoDB action the node policy grants. */
export const NODE_TABLE_ACTIONS = [...NODE_READ_ACTIONS, ...NODE_WRITE_ACTIONS] as const;

/** Select values of the node's Queries: whole items (table, ALL-projected index), a projection, or COUNT. */
export const NODE_QUERY_SELECTS = ['ALL_ATTRIBUTES', 'SPECIFIC_ATTRIBUTES', 'COUNT'] as const;
/** ReturnValues of the node's UpdateItems: the claim and the release read back the item they wrote. */
export const NODE_RETURN_VALUES = ['NONE', 'ALL_NEW'] as const;

/** The IAM policy variable that holds the calling instance's ARN (instance-profile credentials only). */
// biome-ignore lint/suspicious/noTemplateCurlyInString: an IAM policy variable, literally `${…}`, not a JS template.
export const SOURCE_INSTANCE_ARN_VARIABLE = '${ec2:SourceInstanceARN}';

export interface NodePolicyProps {
  readonly tableArn: string;
  readonly vpcId: string;
  readonly clusterName: string;
}

/**
 * The policy for the cluster's instance role (DESIGN invariants 7 and 8): a node reads only the items whose
 * partition key is its own instance ARN (table and its local claimable index), and writes them only through
 * UpdateItem naming the attributes of a claim or a release — never a lease's ENI, address data or prefix, never
 * an attribute of the node item the control plane reads. IAM cannot condition on the sort key, so the node item
 * is protected by its attribute names (item-codec.ts `NODE_WRITABLE_ATTRS`), not by its key. Only from inside
 * the cluster's VPC through a DynamoDB gateway endpoint; no Scan, no batch calls, no EC2.
 */
export function createNodePolicy(scope: Construct, id: string, props: NodePolicyProps): iam.ManagedPolicy {
  const ownPartition = {
    // ForAllValues over an empty set is true; the Null clause makes a request without keys fail.
    'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': [SOURCE_INSTANCE_ARN_VARIABLE] },
    Null: { 'dynamodb:LeadingKeys': 'false' },
    StringEquals: { 'aws:SourceVpc': props.vpcId },
  };
  return new iam.ManagedPolicy(scope, id, {
    description: `vpc-lease ${props.clusterName}: a node's own lease partition only`,
    statements: [
      new iam.PolicyStatement({
        sid: 'ReadOwnPartition',
        actions: [...NODE_READ_ACTIONS],
        resources: [props.tableArn, `${props.tableArn}/index/${CLAIMABLE_INDEX.name}`],
        conditions: {
          ...ownPartition,
          // No ALL_PROJECTED_ATTRIBUTES: the index projects ALL, so nothing needs it.
          StringEqualsIfExists: { 'dynamodb:Select': [...NODE_QUERY_SELECTS] },
        },
      }),
      new iam.PolicyStatement({
        sid: 'ClaimAndReleaseOwnLeases',
        actions: [...NODE_WRITE_ACTIONS],
        resources: [props.tableArn],
        conditions: {
          'ForAllValues:StringEquals': {
            'dynamodb:LeadingKeys': [SOURCE_INSTANCE_ARN_VARIABLE],
            'dynamodb:Attributes': [...NODE_WRITABLE_ATTRS],
          },
          Null: { 'dynamodb:LeadingKeys': 'false', 'dynamodb:Attributes': 'false' },
          StringEquals: { 'aws:SourceVpc': props.vpcId },
          StringEqualsIfExists: { 'dynamodb:ReturnValues': [...NODE_RETURN_VALUES] },
        },
      }),
    ],
  });
}
