import { METRICS_NAMESPACE } from '../../shared/metrics.js';

/**
 * The custom metrics the alarms watch, as the Lambdas emit them through shared/metrics.ts (CloudWatch embedded
 * metric format: dimensions are always `Service` plus the ones the emitter adds). A metric's identity is its
 * full dimension set, so an alarm on a plain metric must name exactly those; where the emitter adds a
 * free-form dimension (a reason, an EC2 action) the alarm aggregates with a Metrics Insights query instead.
 */
export const METRIC_NAMESPACE = METRICS_NAMESPACE;

export const METRIC_NAMES = {
  /** shared/lifecycle/abandon.ts: `{Service: instance-lifecycle, Reason}`, one per ABANDON. */
  launchesAbandoned: 'LaunchAbandoned',
  /** shared/pool/pool-manager.ts: `{Service: pool-manager, ClusterName}`, READY nodes below the low watermark. */
  nodesLowOnLeases: 'NodesLowOnClaimableLeases',
  /** shared/ec2/sdk-ec2.ts: `{Service, Action, Kind}`, failed EC2 calls by error kind (`throttling`, …). */
  ec2Errors: 'Ec2Errors',
} as const;

export const CLUSTER_DIMENSION = 'ClusterName';
export const SERVICE_DIMENSION = 'Service';
export const THROTTLING_KIND = 'throttling';
