import { systemClock } from '../../shared/clock.js';
import { controlPlaneConfigFromEnv } from '../../shared/config/control-plane.js';
import { createSdkDynamoApi } from '../../shared/dynamo/sdk-client.js';
import { budgetedEc2FromEnv } from '../../shared/ec2/budget-env.js';
import { SdkEc2 } from '../../shared/ec2/sdk-ec2.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import { createLogger } from '../../shared/log.js';
import { Metrics } from '../../shared/metrics.js';
import { reportIllFormed } from '../../shared/pool/lease-trust.js';
import { DynamoLeasePartitions } from '../../shared/reconcile/lease-partitions.js';
import { type ReconcileReport, type ReconcilerDeps, reconcile } from '../../shared/reconcile/reconciler.js';

// Built on the first invocation and kept for the container's life.
let deps: ReconcilerDeps | undefined;

function fromEnv(): ReconcilerDeps {
  const config = controlPlaneConfigFromEnv();
  const logger = createLogger({ level: config.logLevel, fields: { service: 'reconciler' } });
  const metrics = new Metrics(logger, 'reconciler');
  const api = createSdkDynamoApi();
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
  };
}

/** The schedule's event carries nothing the pass needs: every pass looks at the whole cluster. */
export async function handler(): Promise<ReconcileReport> {
  deps ??= fromEnv();
  try {
    return await reconcile(deps);
  } finally {
    deps.metrics?.flush();
  }
}
