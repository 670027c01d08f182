import { systemClock } from '../../shared/clock.js';
import { controlPlaneConfigFromEnv } from '../../shared/config/control-plane.js';
import { budgetedEc2FromEnv } from '../../shared/ec2/budget-env.js';
import { SdkEc2 } from '../../shared/ec2/sdk-ec2.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import { createLogger } from '../../shared/log.js';
import { Metrics } from '../../shared/metrics.js';
import { type InvocationTime, SWEEP_DEADLINE_MARGIN_MS } from '../../shared/pool/events.js';
import { reportIllFormed } from '../../shared/pool/lease-trust.js';
import { DynamoLeasePartitions } from '../../shared/reconcile/lease-partitions.js';
import { type PacedReconcileDeps, type PacedReconcileReport, reconcilePaced } from '../../shared/reconcile/paced.js';
import { DynamoSweepCursorStore } from '../../shared/schedule/cursor.js';
import { lambdaDynamoApi } from '../dynamo-api.js';

// Built on the first invocation and kept for the container's life.
let deps: PacedReconcileDeps | undefined;

function fromEnv(): PacedReconcileDeps {
  const config = controlPlaneConfigFromEnv();
  const logger = createLogger({ level: config.logLevel, fields: { service: 'reconciler' } });
  const metrics = new Metrics(logger, 'reconciler');
  const api = lambdaDynamoApi();
  return {
    config,
    logger,
    metrics,
    clock: systemClock,
    ec2: budgetedEc2FromEnv(process.env, {
      ec2: new SdkEc2({ metrics, clusterName: config.clusterName }),
      api,
      tableName: config.tableName,
      clock: systemClock,
      logger,
    }),
    store: new DynamoLeaseStore({
      api,
      tableName: config.tableName,
      onIllFormedItem: reportIllFormed(logger, metrics, config.clusterName),
    }),
    leasePartitions: new DynamoLeasePartitions(api, config.tableName),
    cursor: new DynamoSweepCursorStore(api, config.tableName),
  };
}

/**
 * The schedule's event carries nothing the run needs; the cursor says where the paced walk stands. The
 * deadline leaves one page's work (EC2 and DynamoDB calls for up to 100 nodes) inside the Lambda's timeout.
 */
export async function handler(_event?: unknown, context?: InvocationTime): Promise<PacedReconcileReport> {
  deps ??= fromEnv();
  try {
    const remainingMs = context?.getRemainingTimeInMillis();
    const deadlineMs =
      remainingMs === undefined ? Number.POSITIVE_INFINITY : Date.now() + remainingMs - SWEEP_DEADLINE_MARGIN_MS;
    return await reconcilePaced(deps, deadlineMs);
  } finally {
    deps.metrics?.flush();
  }
}
