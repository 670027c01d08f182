import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../../cli/cli.js';
import { explainAwsError } from '../../cli/errors.js';
import { isAlive, statePath, tryReadLocalState } from '../../cli/local-state.js';
import { runShim } from './support.js';

/**
 * `vpc-lease` as a process (the package.json `bin` shim through tsx), with exactly the environment given: exit
 * codes for bad command lines, the credential and region errors of the SDK's own chains, and `local up|down`.
 */
const dirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'vpc-lease-cli-proc-'));
  dirs.push(dir);
  return dir;
}
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** No credentials anywhere: no variables, an empty HOME, no IMDS. */
function bareEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    PATH: process.env['PATH'] ?? '/usr/bin:/bin',
    HOME: tempDir(),
    AWS_EC2_METADATA_DISABLED: 'true',
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    ...extra,
  };
}

async function inProcess(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(argv, { out: (t) => (out += t), err: (t) => (err += t), env: {} });
  return { code, out, err };
}

describe('vpc-lease command line', () => {
  it('prints help with -h (exit 0) and refuses no command, unknown commands and options (exit 2)', async () => {
    const help = await inProcess('--help');
    expect(help.code).toBe(0);
    for (const name of ['nodes', 'leases', 'lease', 'enis', 'audit', 'gc', 'dlq', 'limits', 'max-pods', 'local'])
      expect(help.out).toMatch(new RegExp(`^  ${name}\\s`, 'm'));
    expect((await inProcess()).code).toBe(2);
    const unknown = await inProcess('frobnicate');
    expect(unknown.code).toBe(2);
    expect(unknown.err).toContain('unknown command "frobnicate"');
    const option = await inProcess('nodes', '--bogus');
    expect(option.code).toBe(2);
    expect(option.err).toContain("'--bogus'");
    const misplaced = await inProcess('nodes', '--dry-run');
    expect(misplaced.code).toBe(2);
    expect(misplaced.err).toContain('nodes does not take --dry-run');
    const extra = await inProcess('nodes', 'now');
    expect(extra.code).toBe(2);
    expect(extra.err).toContain('unexpected argument "now"');
    const region = await inProcess('--region', 'mars-1', 'nodes');
    expect(region.code).toBe(2);
    expect(region.err).toContain('not an AWS region');
    const local = await inProcess('local', 'sideways');
    expect(local.code).toBe(2);
    const commandHelp = await inProcess('leases', '--help');
    expect(commandHelp.out).toContain('usage: vpc-lease leases [--instance');
  });

  it('--local without a running local cloud says how to start one (exit 3)', async () => {
    let err = '';
    const code = await runCli(['--local', 'nodes'], {
      out: () => {},
      err: (t) => (err += t),
      env: { VPC_LEASE_LOCAL_DIR: tempDir() },
    });
    expect(code).toBe(3);
    expect(err).toContain('no local cloud is running');
    expect(err).toContain('vpc-lease local up');
  });

  it('maps denied and rejected calls to what the operator must fix', () => {
    const ctx = { region: 'eu-west-1', tableName: 't1', local: false };
    const denied = Object.assign(new Error('User: arn:aws:iam::1:user/x is not authorized to perform: dynamodb:Scan'), {
      name: 'AccessDeniedException',
    });
    expect(explainAwsError(denied, ctx)?.message).toMatch(
      /^permission denied \(AccessDeniedException\): User: .*dynamodb:Scan/,
    );
    expect(explainAwsError(denied, ctx)?.exitCode).toBe(3);
    const wrapped = new Error('failed to list nodes', {
      cause: Object.assign(new Error('x'), { name: 'UnauthorizedOperation' }),
    });
    expect(explainAwsError(wrapped, ctx)?.message).toMatch(/^permission denied \(UnauthorizedOperation\)/);
    const rejected = Object.assign(new Error('The security token included in the request is invalid.'), {
      name: 'UnrecognizedClientException',
    });
    expect(explainAwsError(rejected, ctx)?.message).toContain('AWS rejected the credentials');
    const table = Object.assign(new Error('Requested resource not found'), { name: 'ResourceNotFoundException' });
    expect(explainAwsError(table, ctx)?.message).toContain('table t1 not found in region eu-west-1');
    // The hint names the output infra/construct/stack.ts declares (CfnOutput 'TableName'), which DEPLOY reads.
    expect(explainAwsError(table, ctx)?.message).toContain('the stack output TableName');
    expect(explainAwsError(new Error('something else'), ctx)).toBeUndefined();
  });
});

describe('vpc-lease executable (bin shim)', () => {
  it('runs offline commands with no credentials at all', async () => {
    const run = await runShim(['--json', 'max-pods', 'c5.4xlarge'], bareEnv());
    expect(run.code, run.err).toBe(0);
    // 7 pod ENIs × 29 addresses + 2 = 205, capped at 110.
    expect(run.json).toMatchObject({
      instanceType: 'c5.4xlarge',
      maxPods: 110,
      podEniSlots: 7,
      addressesPerPodEni: 29,
    });
  });

  it('says there are no credentials (exit 3) when the standard chain finds none', async () => {
    const run = await runShim(['nodes', '--region', 'us-east-1'], bareEnv());
    expect(run.code).toBe(3);
    expect(run.err).toContain('no AWS credentials found');
  });

  it('says there is no region (exit 3)', async () => {
    const run = await runShim(['nodes'], bareEnv({ AWS_ACCESS_KEY_ID: 'a', AWS_SECRET_ACCESS_KEY: 'b' }));
    expect(run.code).toBe(3);
    expect(run.err).toContain('no region');
  });

  it('local up starts a background cloud the other commands reach with --local; local down stops it', async () => {
    const dir = tempDir();
    const env = bareEnv({ VPC_LEASE_LOCAL_DIR: dir });
    const up = await runShim(['local', 'up', '--time-scale', '0.05'], env);
    expect(up.code, up.err + up.out).toBe(0);
    const state = tryReadLocalState(dir);
    try {
      expect(state && isAlive(state.pid)).toBe(true);
      expect(existsSync(join(dir, 'dynamodb'))).toBe(true); // DynamoDB data on disk
      const again = await runShim(['local', 'up'], env);
      expect(again.out).toContain('already running');
      const nodes = await runShim(['--local', 'nodes'], env);
      expect(nodes.code, nodes.err).toBe(0);
      expect(nodes.out.trim()).toBe('no nodes');
      const enis = await runShim(['--local', '--json', 'enis'], env);
      expect(enis.json).toEqual([]);
      const dlq = await runShim(['--local', 'dlq'], env);
      expect(dlq.out).toContain('vpc-lease-events-dlq: empty');
    } finally {
      const down = await runShim(['local', 'down'], env);
      expect(down.code, down.err).toBe(0);
      expect(down.out).toContain(`local cloud stopped (pid ${state?.pid})`);
    }
    expect(state && isAlive(state.pid)).toBe(false);
    expect(existsSync(statePath(dir))).toBe(false);
    const status = await runShim(['local', 'status'], env);
    expect(status.code).toBe(1);
    expect(status.out).toContain('no local cloud running');
  }, 90_000);
});
