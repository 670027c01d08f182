import { dnsSuffixOfRegion, partitionIdOfRegion } from '../../shared/domain/partition.js';
import { concretize } from './intrinsics.js';

/** An IAM policy document as IAM reads it (after CloudFormation resolved it). */
export interface PolicyDocument {
  readonly Version?: string;
  readonly Statement: readonly Record<string, unknown>[];
}

/** The node policy as the construct synthesizes it: CloudFormation intrinsics still in place. */
export interface SynthesizedNodePolicy {
  readonly document: unknown;
  /** Logical id of the lease table, whose Arn the policy's resources reference. */
  readonly tableLogicalId: string;
}

export interface LocalPolicyValues {
  readonly region: string;
  readonly accountId: string;
  readonly tableName: string;
  readonly vpcId: string;
  readonly partition?: string;
}

/** The VPC id given to the synthesis; the local cloud's own VPC replaces it. */
export const SYNTH_VPC_ID = 'vpc-0feedfacefeedface';
export const SYNTH_REGION = 'us-east-1';
export const SYNTH_ACCOUNT = '000000000000';

/** The policy with the table ARN, Region, account and VPC of this local cloud in place of the intrinsics. */
export function localizePolicy(policy: SynthesizedNodePolicy, values: LocalPolicyValues): PolicyDocument {
  const partition = values.partition ?? partitionIdOfRegion(values.region);
  const tableArn = `arn:${partition}:dynamodb:${values.region}:${values.accountId}:table/${values.tableName}`;
  const id = policy.tableLogicalId;
  const refs = {
    'AWS::Partition': partition,
    'AWS::Region': values.region,
    'AWS::AccountId': values.accountId,
    'AWS::URLSuffix': dnsSuffixOfRegion(values.region),
    [id]: values.tableName,
    [`${id}.Arn`]: tableArn,
    [`${id}.StreamArn`]: `${tableArn}/stream/local`,
  };
  // The synthesis's own env shows up as literals wherever the construct formats an ARN itself.
  const text = JSON.stringify(concretize(policy.document, refs))
    .replaceAll(SYNTH_VPC_ID, values.vpcId)
    .replaceAll(`:${SYNTH_REGION}:${SYNTH_ACCOUNT}:`, `:${values.region}:${values.accountId}:`);
  return JSON.parse(text) as PolicyDocument;
}
