import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
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

const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const CACHE_DIR = join(REPO, 'node_modules', '.cache', 'vpc-lease');
/** The VPC id given to the synthesis; the local cloud's own VPC replaces it. */
export const SYNTH_VPC_ID = 'vpc-0feedfacefeedface';
const SYNTH_REGION = 'us-east-1';
const SYNTH_ACCOUNT = '000000000000';

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sourceFiles(path));
    else if (entry.name.endsWith('.ts')) out.push(path);
  }
  return out.sort();
}

/** What the synthesis depends on: the construct, the shared code it imports, and the CDK version. */
function sourceHash(): string {
  const hash = createHash('sha256');
  for (const file of [...sourceFiles(join(REPO, 'infra', 'construct')), ...sourceFiles(join(REPO, 'shared'))]) {
    hash.update(file.slice(REPO.length));
    hash.update(readFileSync(file));
  }
  hash.update(readFileSync(join(REPO, 'node_modules', 'aws-cdk-lib', 'package.json')));
  return hash.digest('hex').slice(0, 20);
}

async function synthesize(): Promise<SynthesizedNodePolicy> {
  // Loaded only on a cache miss: aws-cdk-lib and the synthesis take seconds.
  const { App, Stack } = await import('aws-cdk-lib');
  const { VpcLeaseAllocator } = await import('../../construct/allocator.js');
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
  const stack = new Stack(app, 'LocalCloud', { env: { account: SYNTH_ACCOUNT, region: SYNTH_REGION } });
  new VpcLeaseAllocator(stack, 'Allocator', { vpc: SYNTH_VPC_ID, autoScalingGroups: ['local'] });
  const template = app.synth().getStackByName(stack.stackName).template as {
    Resources: Record<string, { Type: string; Properties: Record<string, unknown> }>;
  };
  const of = (type: string): [string, { Properties: Record<string, unknown> }][] =>
    Object.entries(template.Resources).filter(([, r]) => r.Type === type);
  const policies = of('AWS::IAM::ManagedPolicy');
  const tables = of('AWS::DynamoDB::Table');
  if (policies.length !== 1 || tables.length !== 1)
    throw new Error(
      `failed to find the node policy: ${policies.length} managed policies, ${tables.length} tables in the template`,
    );
  return { document: policies[0]![1].Properties['PolicyDocument'], tableLogicalId: tables[0]![0] };
}

let loaded: Promise<SynthesizedNodePolicy> | undefined;

/**
 * The node policy from the construct's synthesized CloudFormation template, never a copy: synthesized in
 * process once per source version and kept under node_modules/.cache, since a synthesis costs seconds.
 */
export function synthesizedNodePolicy(): Promise<SynthesizedNodePolicy> {
  loaded ??= (async () => {
    const path = join(CACHE_DIR, `node-policy-${sourceHash()}.json`);
    try {
      return JSON.parse(readFileSync(path, 'utf8')) as SynthesizedNodePolicy;
    } catch {
      const policy = await synthesize();
      mkdirSync(CACHE_DIR, { recursive: true });
      const tmp = `${path}.${process.pid}.tmp`;
      writeFileSync(tmp, JSON.stringify(policy));
      renameSync(tmp, path);
      return policy;
    }
  })();
  return loaded;
}

/** The policy with the table ARN, Region, account and VPC of this local cloud in place of the intrinsics. */
export function localizePolicy(policy: SynthesizedNodePolicy, values: LocalPolicyValues): PolicyDocument {
  const partition = values.partition ?? 'aws';
  const tableArn = `arn:${partition}:dynamodb:${values.region}:${values.accountId}:table/${values.tableName}`;
  const id = policy.tableLogicalId;
  const refs = {
    'AWS::Partition': partition,
    'AWS::Region': values.region,
    'AWS::AccountId': values.accountId,
    'AWS::URLSuffix': 'amazonaws.com',
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
