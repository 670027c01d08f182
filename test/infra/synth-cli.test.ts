import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../infra/construct/control-plane-function.js';

const NODE_IMAGE = `123456789012.dkr.ecr.eu-west-1.amazonaws.com/vpc-lease-cni@sha256:${'d'.repeat(64)}`;

interface CfnTemplate {
  Outputs?: Record<string, { Value: unknown }>;
  Resources: Record<string, { Type: string; Properties: Record<string, unknown>; Metadata?: Record<string, unknown> }>;
  Parameters?: Record<string, unknown>;
}

/**
 * `cdk synth` exactly as CI runs it, offline: telemetry and notices off, and every HTTP(S) request sent to a
 * closed local port, so anything that needed the network would fail here. It bundles the three real handlers
 * with the local esbuild and runs cdk-nag (the app registers it), so this is the slow test of the suite.
 */
describe('CLI: cdk synth', () => {
  let outDir: string;
  let run: ReturnType<typeof spawnSync>;

  beforeAll(() => {
    outDir = mkdtempSync(join(tmpdir(), 'vpc-lease-synth-'));
    run = spawnSync(
      join(PROJECT_ROOT, 'node_modules', '.bin', 'cdk'),
      [
        'synth',
        '--no-notices',
        '--quiet',
        '--output',
        outDir,
        '-c',
        'example=true',
        '-c',
        'clusterName=ci',
        '-c',
        'autoScalingGroups=ng-a,ng-b',
        '-c',
        'nodeRoleNames=ci-node-role',
        '-c',
        `nodeImageUri=${NODE_IMAGE}`,
      ],
      {
        cwd: PROJECT_ROOT,
        encoding: 'utf8',
        timeout: 240_000,
        env: {
          ...process.env,
          CDK_DISABLE_CLI_TELEMETRY: 'true',
          HTTPS_PROXY: 'http://127.0.0.1:9',
          HTTP_PROXY: 'http://127.0.0.1:9',
          NO_PROXY: '',
          AWS_EC2_METADATA_DISABLED: 'true',
        },
      },
    );
  }, 300_000);

  afterAll(() => {
    rmSync(outDir, { recursive: true, force: true });
  });

  it('succeeds offline and writes both stacks', () => {
    expect(run.status, String(run.stderr)).toBe(0);
    expect(existsSync(join(outDir, 'VpcLease.template.json'))).toBe(true);
    expect(existsSync(join(outDir, 'VpcLeaseTrial.template.json'))).toBe(true);
  });

  it('bundles each Lambda as one ESM file with its handler export', () => {
    const template = JSON.parse(readFileSync(join(outDir, 'VpcLease.template.json'), 'utf8')) as CfnTemplate;
    const fns = Object.values(template.Resources).filter((r) => r.Type === 'AWS::Lambda::Function');
    expect(fns).toHaveLength(3);
    for (const fn of fns) {
      const assetPath = String(fn.Metadata?.['aws:asset:path']);
      const files = readdirSync(join(outDir, assetPath));
      expect(files).toContain('index.mjs');
      const code = readFileSync(join(outDir, assetPath, 'index.mjs'), 'utf8');
      expect(code.startsWith('import { createRequire')).toBe(true);
      expect(code).toMatch(/export\s*\{[^}]*\bas handler\b|export\s*\{[^}]*\bhandler\b/);
    }
  });

  it('loads each bundle as an ES module with only its configured environment, exporting a handler function', () => {
    const template = JSON.parse(readFileSync(join(outDir, 'VpcLease.template.json'), 'utf8')) as CfnTemplate;
    for (const fn of Object.values(template.Resources).filter((r) => r.Type === 'AWS::Lambda::Function')) {
      const file = join(outDir, String(fn.Metadata?.['aws:asset:path']), 'index.mjs');
      const vars = (fn.Properties.Environment as { Variables: Record<string, unknown> }).Variables;
      // Deploy-time values (table name, queue URL) become plausible literals; the rest is what Lambda gets.
      const env = Object.fromEntries(
        Object.entries(vars).map(([k, v]) => [
          k,
          typeof v === 'string' ? v : k.endsWith('_URL') ? 'https://sqs.eu-west-1.amazonaws.com/1/q' : 'leases',
        ]),
      );
      // A fresh process, as Lambda starts one: a bundle that needs a missing module or a CommonJS global fails.
      const probe = spawnSync(
        process.execPath,
        [
          '--input-type=module',
          '-e',
          `const m = await import(${JSON.stringify(file)}); process.stdout.write(typeof m.handler);`,
        ],
        {
          encoding: 'utf8',
          timeout: 60_000,
          env: {
            PATH: process.env.PATH,
            AWS_REGION: 'eu-west-1',
            AWS_ACCESS_KEY_ID: 'x',
            AWS_SECRET_ACCESS_KEY: 'x',
            ...env,
          },
        },
      );
      expect(probe.stderr).toBe('');
      expect(probe.stdout).toBe('function');
    }
  }, 120_000);

  it('ships shaken bundles: under 1 MB, class names kept, a map without the sources, credentials from the environment only', () => {
    const template = JSON.parse(readFileSync(join(outDir, 'VpcLease.template.json'), 'utf8')) as CfnTemplate;
    for (const fn of Object.values(template.Resources).filter((r) => r.Type === 'AWS::Lambda::Function')) {
      const file = join(outDir, String(fn.Metadata?.['aws:asset:path']), 'index.mjs');
      expect(statSync(file).size, file).toBeLessThanOrEqual(1_000_000);
      const code = readFileSync(file, 'utf8');
      // The SDK's default chain (profiles, SSO, IMDS) is replaced by lambdas/env-credential-provider.ts.
      expect(code).not.toContain('credential-provider-node - defaultProvider');
      expect(code).toContain('AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set');
      // keepNames: errors name themselves after their class in logs.
      expect(code).toContain('"LeaseConflictError"');
      const map = JSON.parse(readFileSync(`${file}.map`, 'utf8')) as { sources: string[]; sourcesContent?: unknown[] };
      expect(map.sources.some((s) => s.endsWith('shared/lease-store/dynamo-lease-store.ts'))).toBe(true);
      expect((map.sourcesContent ?? []).filter((c) => c !== null)).toEqual([]);
    }
  });

  it('configures the stack from context: hooks on the named groups, the policy on the named role', () => {
    const template = JSON.parse(readFileSync(join(outDir, 'VpcLease.template.json'), 'utf8')) as CfnTemplate;
    const hooks = Object.values(template.Resources).filter((r) => r.Type === 'AWS::AutoScaling::LifecycleHook');
    expect(hooks.map((h) => h.Properties.AutoScalingGroupName).sort()).toEqual(['ng-a', 'ng-a', 'ng-b', 'ng-b']);
    const policy = Object.values(template.Resources).find((r) => r.Type === 'AWS::IAM::ManagedPolicy');
    expect(policy?.Properties.Roles).toEqual(['ci-node-role']);
  });

  it('carries nodeImageUri to the NodeImageUri output, and leaves no image for deploy to build (no Docker)', () => {
    const template = JSON.parse(readFileSync(join(outDir, 'VpcLease.template.json'), 'utf8')) as CfnTemplate;
    expect(template.Outputs?.['NodeImageUri']?.Value).toBe(NODE_IMAGE);
    for (const file of readdirSync(outDir).filter((f) => f.endsWith('.assets.json'))) {
      const assets = JSON.parse(readFileSync(join(outDir, file), 'utf8')) as { dockerImages?: object };
      expect(assets.dockerImages ?? {}, file).toEqual({});
    }
  });

  it('leaves the VPC to a deploy-time parameter when no vpcId is in the context', () => {
    const template = JSON.parse(readFileSync(join(outDir, 'VpcLease.template.json'), 'utf8')) as CfnTemplate;
    expect(template.Parameters?.VpcId).toMatchObject({ Type: 'AWS::EC2::VPC::Id' });
  });
});
