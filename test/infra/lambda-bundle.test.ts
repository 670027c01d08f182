import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../infra/construct/control-plane-function.js';
import { type Ec2SimulatorServer, startEc2Simulator } from '../../local-cloud/ec2/index.js';
import { lambdaBuildOptions } from '../../packaging/lambda-bundle.js';

const run = promisify(execFile);

/**
 * The Lambda bundle options (ES modules of the SDK, minified, the SDK's credential chain replaced by the
 * environment's credentials) produce a bundle whose EC2 client still signs and decodes a real call.
 */
describe('Lambda bundle options', () => {
  let dir: string;
  let bundle: string;
  let sim: Ec2SimulatorServer;
  let subnetId: string;
  let vpcId: string;
  let otherVpcId: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'vpc-lease-bundle-'));
    bundle = join(dir, 'probe.mjs');
    await build({
      ...lambdaBuildOptions(join(PROJECT_ROOT, 'test', 'infra', 'support', 'lambda-bundle-probe.ts'), bundle),
      absWorkingDir: PROJECT_ROOT,
      logLevel: 'silent',
    });
    sim = await startEc2Simulator({ region: 'eu-west-1', accountId: '123456789012', seed: 3 });
    vpcId = sim.admin.seedVpc('10.0.0.0/16').vpcId;
    otherVpcId = sim.admin.seedVpc('10.1.0.0/16').vpcId;
    subnetId = sim.admin.seedSubnet(vpcId, '10.0.1.0/24').subnetId;
    sim.admin.seedSubnet(otherVpcId, '10.1.1.0/24');
  }, 120_000);

  afterAll(async () => {
    await sim?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  type Subnet = { id: string; cidr: string; free: number };
  async function probe(credentials: Record<string, string>): Promise<{ subnets?: Subnet[]; error?: string }> {
    const env = { PATH: process.env['PATH'] ?? '', AWS_REGION: 'eu-west-1', AWS_ENDPOINT_URL_EC2: sim.endpoint };
    const { stdout } = await run(process.execPath, [bundle], { env: { ...env, ...credentials }, timeout: 60_000 });
    return JSON.parse(stdout) as { subnets?: Subnet[]; error?: string };
  }

  it('signs with the environment credentials, sends the filter and decodes the answer', async () => {
    const out = await probe({ AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE', AWS_SECRET_ACCESS_KEY: 'secret', PROBE_VPC_ID: vpcId });
    // A /24 less AWS's five reserved addresses; the other VPC's subnet is filtered out.
    expect(out).toEqual({ subnets: [{ id: subnetId, cidr: '10.0.1.0/24', free: 251 }] });
  });

  it('keeps only the EC2 shapes the code sends: the bundle is under 600 kB', () => {
    // Without the schema-key rewrite (packaging/sdk-schema-keys.ts) every EC2 shape stays: about 930 kB.
    expect(statSync(bundle).size).toBeLessThan(600_000);
    expect(readFileSync(bundle, 'utf8')).not.toContain('AcceptAddressTransfer');
  });

  it('without them, fails at once with the replacement provider’s message (no profile, SSO or IMDS lookup)', async () => {
    const out = await probe({});
    expect(out.error).toMatch(/AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set/);
  });
});
