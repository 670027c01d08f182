import { SdkAutoScaling } from '../../shared/autoscaling/sdk-autoscaling.js';
import { systemClock } from '../../shared/clock.js';
import { controlPlaneConfigFromEnv } from '../../shared/config/control-plane.js';
import { createSdkDynamoApi } from '../../shared/dynamo/sdk-client.js';
import { budgetedEc2FromEnv } from '../../shared/ec2/budget-env.js';
import { SdkEc2 } from '../../shared/ec2/sdk-ec2.js';
import { ValidationError } from '../../shared/errors.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import type { LifecycleDeps } from '../../shared/lifecycle/deps.js';
import { createLogger } from '../../shared/log.js';
import { Metrics } from '../../shared/metrics.js';
import { SqsRequeue } from '../../shared/queue/requeue.js';

/** The queue the function re-enqueues waiting work to: its own event source queue. */
export const QUEUE_URL_ENV = 'VPC_LEASE_QUEUE_URL';

/**
 * Everything the function needs, built once per container from its environment and reused by every
 * invocation (SDK clients keep their connections, the EC2 adapter its limits cache and concurrency cap).
 * Endpoints come from the SDK's own `AWS_ENDPOINT_URL_<SERVICE>` variables, so the local cloud needs no code.
 */
export function lifecycleDepsFromEnv(env: NodeJS.ProcessEnv = process.env): LifecycleDeps {
  const config = controlPlaneConfigFromEnv(env);
  const queueUrl = env[QUEUE_URL_ENV];
  if (!queueUrl) throw new ValidationError(`${QUEUE_URL_ENV} is not set`);
  const logger = createLogger({ level: config.logLevel, fields: { service: 'instance-lifecycle' } });
  const metrics = new Metrics(logger, 'instance-lifecycle');
  const api = createSdkDynamoApi();
  const sdkEc2 = new SdkEc2({ metrics, clusterName: config.clusterName });
  return {
    config,
    logger,
    metrics,
    clock: systemClock,
    ec2: budgetedEc2FromEnv(env, { ec2: sdkEc2, api, tableName: config.tableName, clock: systemClock, logger }),
    autoScaling: new SdkAutoScaling({ metrics }),
    store: new DynamoLeaseStore({ api, tableName: config.tableName }),
    requeue: new SqsRequeue(queueUrl),
  };
}
