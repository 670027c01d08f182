/**
 * The background process of `vpc-lease local up`: the local cloud with DynamoDB on disk and the control plane
 * deployed as `npm start` deploys it (no node group: create one, or run `npm start -- --keep` for a populated
 * cloud). It writes the state file the CLI's `--local` reads, and removes it when SIGTERM (`local down`) or
 * SIGINT stops it.
 *
 *   local-daemon.ts <local-dir> <time-scale>
 */

import { startLocalCloud } from '../local-cloud/cloud.js';
import { deployControlPlane } from '../local-cloud/scenario/deploy.js';
import { CLUSTER_NAME, TABLE_NAME } from '../local-cloud/scenario/run.js';
import { createLogger } from '../shared/log.js';
import { removeLocalState, writeLocalState } from './local-state.js';

async function main(): Promise<void> {
  const [localDir, timeScaleRaw] = process.argv.slice(2);
  if (!localDir) throw new Error('usage: local-daemon.ts <local-dir> [time-scale]');
  const timeScale = Number(timeScaleRaw ?? '1');
  const log = createLogger({ level: 'warn', fields: { service: 'local-cloud' } });
  // EC2 lives in memory but DynamoDB on disk: a fixed seed would hand out the instance and ENI ids of an earlier
  // run again, and a new instance would find a stale node item under its own id.
  const seed = Date.now() % 1_000_000_007;
  const cloud = await startLocalCloud({
    dataDir: localDir,
    timeScale,
    seed,
    leaseTable: TABLE_NAME,
    seedNetwork: true,
    log,
  });
  const deployment = deployControlPlane(cloud, {
    config: { clusterName: CLUSTER_NAME, tableName: TABLE_NAME, logLevel: 'warn' },
    onScheduleError: (fn, err) => log.warn('scheduled invocation failed', { fn, err }),
  });
  writeLocalState(localDir, {
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
    vpcId: cloud.network?.vpcId ?? '',
    subnetIds: cloud.network?.subnetIds ?? [],
    dataDir: localDir,
  });
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    removeLocalState(localDir);
    deployment
      .stop()
      .then(() => cloud.close())
      .finally(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((err: unknown) => {
  process.stderr.write(`local cloud failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
