import type { DynamoDBBatchResponse } from 'aws-lambda';
import { systemClock } from '../../shared/clock.js';
import { controlPlaneConfigFromEnv } from '../../shared/config/control-plane.js';
import { budgetedEc2FromEnv } from '../../shared/ec2/budget-env.js';
import { SdkEc2 } from '../../shared/ec2/sdk-ec2.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import { createLogger } from '../../shared/log.js';
import { Metrics } from '../../shared/metrics.js';
import {
  createPoolManagerHandler,
  type InvocationTime,
  type PoolManagerEvent,
  type PoolManagerHandler,
} from '../../shared/pool/events.js';
import { reportIllFormed } from '../../shared/pool/lease-trust.js';
import type { SweepReport } from '../../shared/pool/sweep.js';
import { DynamoSweepCursorStore } from '../../shared/schedule/cursor.js';
import { lambdaDynamoApi } from '../dynamo-api.js';

// Built on the first invocation and kept for the container's life (SDK clients, limits cache, mutation cap).
let poolHandler: PoolManagerHandler | undefined;

function fromEnv(): PoolManagerHandler {
  const config = controlPlaneConfigFromEnv();
  const logger = createLogger({ level: config.logLevel, fields: { service: 'pool-manager' } });
  const metrics = new Metrics(logger, 'pool-manager');
  const api = lambdaDynamoApi();
  const sdkEc2 = new SdkEc2({ metrics, clusterName: config.clusterName });
  return createPoolManagerHandler({
    config,
    logger,
    metrics,
    clock: systemClock,
    ec2: budgetedEc2FromEnv(process.env, { ec2: sdkEc2, api, tableName: config.tableName, clock: systemClock, logger }),
    sweepCursor: new DynamoSweepCursorStore(api, config.tableName),
    store: new DynamoLeaseStore({
      api,
      tableName: config.tableName,
      onIllFormedItem: reportIllFormed(logger, metrics, config.clusterName),
    }),
  });
}

/** DynamoDB stream batches (claims and releases; partial failures by sequence number) and the schedule. */
export async function handler(
  event: PoolManagerEvent,
  context?: InvocationTime,
): Promise<DynamoDBBatchResponse | SweepReport> {
  poolHandler ??= fromEnv();
  return poolHandler(event, context);
}
