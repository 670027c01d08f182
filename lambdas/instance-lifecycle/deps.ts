import { SdkAutoScaling } from '../../shared/autoscaling/sdk-autoscaling.js';
import { systemClock } from '../../shared/clock.js';
import { controlPlaneConfigFromEnv } from '../../shared/config/control-plane.js';
import { ATTACH_WAIT_ENV, budgetedEc2FromEnv } from '../../shared/ec2/budget-env.js';
import { SdkEc2 } from '../../shared/ec2/sdk-ec2.js';
import { withSubnetAnswersShared } from '../../shared/ec2/subnet-answers.js';
import { ValidationError } from '../../shared/errors.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import type { LifecycleDeps } from '../../shared/lifecycle/deps.js';
import { createLogger } from '../../shared/log.js';
import { Metrics } from '../../shared/metrics.js';
import { SqsRequeue } from '../../shared/queue/requeue.js';
import { lambdaDynamoApi } from '../dynamo-api.js';

/** The queue the function re-enqueues waiting work to: its own event source queue. */
export const QUEUE_URL_ENV = 'VPC_LEASE_QUEUE_URL';
/** EC2 attaches an ENI in a few seconds; one look after this catches most of them. */
const DEFAULT_ATTACH_WAIT_MS = 3000;
/**
 * How long a DescribeSubnets answer is shared, in attach waits (9 s at AWS's pace; a local cloud's pace scales
 * the attach wait, and this with it).
 */
const SUBNET_ANSWER_ATTACH_WAITS = 3;

function attachWaitMsOf(env: NodeJS.ProcessEnv): number {
  const raw = env[ATTACH_WAIT_ENV];
  if (raw === undefined || raw === '') return DEFAULT_ATTACH_WAIT_MS;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0 || value > 20_000)
    throw new ValidationError(`${ATTACH_WAIT_ENV} must be an integer of ms in [0, 20000], got ${raw}`);
  return value;
}

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
  const api = lambdaDynamoApi();
  const sdkEc2 = new SdkEc2({ metrics, clusterName: config.clusterName });
  const attachWaitMs = attachWaitMsOf(env);
  const budgeted = budgetedEc2FromEnv(env, {
    ec2: sdkEc2,
    api,
    tableName: config.tableName,
    clock: systemClock,
    logger,
  });
  return {
    config,
    logger,
    metrics,
    clock: systemClock,
    ec2: withSubnetAnswersShared(budgeted, systemClock, SUBNET_ANSWER_ATTACH_WAITS * attachWaitMs),
    autoScaling: new SdkAutoScaling({ metrics }),
    store: new DynamoLeaseStore({ api, tableName: config.tableName }),
    requeue: new SqsRequeue(queueUrl),
    attachWaitMs,
  };
}
