import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { runCli } from '../../cli/cli.js';
import { writeLocalState } from '../../cli/local-state.js';
import { LAUNCHING, TERMINATING } from '../../local-cloud/autoscaling/simulator.js';
import { type LocalCloud, startLocalCloud } from '../../local-cloud/cloud.js';
import { type Deployment, deployControlPlane, LAUNCH_HOOK, TERMINATE_HOOK } from '../../local-cloud/scenario/deploy.js';
import { CLUSTER_NAME, TABLE_NAME } from '../../local-cloud/scenario/run.js';
import { until } from '../../local-cloud/scenario/until.js';
import { instanceArn } from '../../shared/domain/arn.js';
import { SdkDynamoApi } from '../../shared/dynamo/sdk-client.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import { DynamoLeasePartitions } from '../../shared/reconcile/lease-partitions.js';

export interface CliRun {
  readonly code: number;
  readonly out: string;
  readonly err: string;
  /** stdout parsed, when it is JSON. */
  readonly json: unknown;
}

/**
 * The local cloud with the control plane deployed exactly as `npm start` and `local up` deploy it, an Auto
 * Scaling group of two nodes brought up by the real lifecycle handler, and a state file in a temp folder, so
 * `vpc-lease --local …` runs against it in-process.
 */
export class CliFixture {
  readonly localDir = mkdtempSync(join(tmpdir(), 'vpc-lease-cli-'));
  readonly store: DynamoLeaseStore;
  /** The reconciler's stray-lease marks, read and cleared as the reconciler does. */
  readonly leasePartitions: DynamoLeasePartitions;
  private readonly ddb: DynamoDBClient;
  private readonly savedEnv = { ...process.env };
  instanceIds: string[] = [];

  private constructor(
    readonly cloud: LocalCloud,
    readonly deployment: Deployment,
  ) {
    this.ddb = new DynamoDBClient({
      region: cloud.region,
      endpoint: cloud.endpoints.dynamodb,
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
    this.store = new DynamoLeaseStore({ api: new SdkDynamoApi(this.ddb), tableName: TABLE_NAME });
    this.leasePartitions = new DynamoLeasePartitions(new SdkDynamoApi(this.ddb), TABLE_NAME);
  }

  static async start(nodes = 2): Promise<CliFixture> {
    const cloud = await startLocalCloud({ timeScale: 0.02, leaseTable: TABLE_NAME, seedNetwork: true });
    const deployment = deployControlPlane(cloud, {
      config: { clusterName: CLUSTER_NAME, tableName: TABLE_NAME, heartbeatTimeoutS: 900, logLevel: 'error' },
      schedules: [],
    });
    const f = new CliFixture(cloud, deployment);
    cloud.autoScaling.simulator.createGroup({
      name: 'cli-nodes',
      minSize: 0,
      maxSize: 5,
      desiredCapacity: nodes,
      instanceTypes: ['m5.large'],
      subnetIds: [cloud.network!.subnetIds[0]!],
      hooks: [
        { name: LAUNCH_HOOK, transition: LAUNCHING, heartbeatTimeoutS: 900, defaultResult: 'ABANDON' },
        { name: TERMINATE_HOOK, transition: TERMINATING, heartbeatTimeoutS: 900, defaultResult: 'CONTINUE' },
      ],
    });
    await until(
      'nodes InService',
      () => {
        const instances = [...(cloud.autoScaling.simulator.getGroup('cli-nodes')?.instances.values() ?? [])];
        f.instanceIds = instances
          .filter((i) => i.lifecycleState === 'InService')
          .map((i) => i.instanceId)
          .sort();
        return f.instanceIds.length === nodes;
      },
      30_000,
    );
    writeLocalState(f.localDir, {
      pid: process.pid,
      startedAt: new Date().toISOString(),
      owner: 'local-up',
      region: cloud.region,
      accountId: cloud.accountId,
      endpoints: cloud.endpoints,
      tableName: TABLE_NAME,
      clusterName: CLUSTER_NAME,
      queueUrl: deployment.queue.url(),
      dlqUrl: deployment.dlq.url(),
      vpcId: cloud.network!.vpcId,
      subnetIds: cloud.network!.subnetIds,
      dataDir: f.localDir,
    });
    return f;
  }

  arnOf(instanceId: string): string {
    return instanceArn(this.cloud.region, this.cloud.accountId, instanceId, this.cloud.partition);
  }

  /** The CLI in-process, with `--local` pointing at this fixture's state file. */
  async cli(...argv: string[]): Promise<CliRun> {
    return this.cliWithEnv({ VPC_LEASE_LOCAL_DIR: this.localDir }, ...argv);
  }

  async cliWithEnv(env: NodeJS.ProcessEnv, ...argv: string[]): Promise<CliRun> {
    let out = '';
    let err = '';
    const code = await runCli(argv, { out: (t) => (out += t), err: (t) => (err += t), env });
    let json: unknown;
    try {
      json = JSON.parse(out);
    } catch {
      json = undefined;
    }
    return { code, out, err, json };
  }

  async close(): Promise<void> {
    this.ddb.destroy();
    await this.deployment.stop();
    await this.cloud.close();
    rmSync(this.localDir, { recursive: true, force: true });
    for (const key of Object.keys(process.env)) if (!(key in this.savedEnv)) delete process.env[key];
    Object.assign(process.env, this.savedEnv);
  }
}

export const SHIM = join(import.meta.dirname, '..', '..', 'cli', 'vpc-lease.mjs');

/** The real executable (package.json `bin`), as a separate process with exactly `env`. */
export function runShim(argv: readonly string[], env: NodeJS.ProcessEnv, timeoutMs = 60_000): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SHIM, ...argv], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (err += c.toString('utf8')));
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      let json: unknown;
      try {
        json = JSON.parse(out);
      } catch {
        json = undefined;
      }
      resolve({ code: code ?? -1, out, err, json });
    });
  });
}
