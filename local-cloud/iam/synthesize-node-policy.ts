import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SYNTH_ACCOUNT, SYNTH_REGION, SYNTH_VPC_ID, type SynthesizedNodePolicy } from './node-policy.js';

/*
 * The synthesis, apart from node-policy.ts: it loads aws-cdk-lib and the construct, which a bundled VM guest must
 * not pull in; the guest gets the synthesized policy as JSON from the host and localizes it with node-policy.ts.
 */
const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const CACHE_DIR = join(REPO, 'node_modules', '.cache', 'vpc-lease');

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
  const { VpcLeaseAllocator } = await import('../../infra/construct/allocator.js');
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
