import { METRIC_DIMENSIONS, METRICS_NAMESPACE, METRIC_NAMES as SHARED_METRIC_NAMES } from '../../shared/metrics.js';

/**
 * The custom metrics the alarms watch, by the names the Lambdas emit them under (shared/metrics.ts — one
 * source, so a rename reaches the alarms). CloudWatch embedded metric format: dimensions are always `Service`
 * plus the ones the emitter adds. A metric's identity is its full dimension set, so an alarm on a plain metric
 * must name exactly those; where the emitter adds a free-form dimension (a reason, an EC2 action) the alarm
 * aggregates with a Metrics Insights query instead, scoped by `ClusterName` so two clusters in one account
 * and Region never trip each other's alarms.
 */
export const METRIC_NAMESPACE = METRICS_NAMESPACE;

export const METRIC_NAMES = {
  /** `{Service: instance-lifecycle, ClusterName, Reason}`, one per ABANDON. */
  launchesAbandoned: SHARED_METRIC_NAMES.launchAbandoned,
  /** `{Service: pool-manager, ClusterName}`, READY nodes below the low watermark. */
  nodesLowOnLeases: SHARED_METRIC_NAMES.nodesLowOnClaimableLeases,
  /** `{Service: pool-manager, ClusterName, Reason}`, one per lease or item a node wrote that was not acted on. */
  untrustedLeasesRejected: SHARED_METRIC_NAMES.untrustedLeaseRejected,
  /** `{Service: reconciler, ClusterName}`, partitions the daily census left unread for their size (every run, 0 too). */
  oversizedPartitions: SHARED_METRIC_NAMES.reconcilerOversizedPartitions,
  /** `{Service: instance-lifecycle | pool-manager, ClusterName, Reason, SubnetId}`, one per create refused for room. */
  subnetFull: SHARED_METRIC_NAMES.subnetFull,
  /** `{Service, ClusterName, Action, Kind}`, failed EC2 calls by error kind (`throttling`, …). */
  ec2Errors: SHARED_METRIC_NAMES.ec2Errors,
} as const;

export const CLUSTER_DIMENSION = METRIC_DIMENSIONS.cluster;
export const SERVICE_DIMENSION = METRIC_DIMENSIONS.service;
export const KIND_DIMENSION = METRIC_DIMENSIONS.kind;
export const THROTTLING_KIND = 'throttling';
export const REASON_DIMENSION = METRIC_DIMENSIONS.reason;
/** The abandon reason (first word of the node's failureReason) when no candidate subnet can hold a launch. */
export const SUBNETS_EXHAUSTED_REASON = 'subnets-exhausted';

/**
 * A Metrics Insights query summing `metric` over every dimension set of this cluster's emissions, further
 * filtered by `where` (dimension → value). Cluster names are validated to letters, digits and `_ . -`
 * (shared/config/control-plane.ts), so they need no quoting beyond the single quotes.
 */
export function clusterSumQuery(
  metric: string,
  clusterName: string,
  where: Readonly<Record<string, string>> = {},
): string {
  const clauses = Object.entries({ [CLUSTER_DIMENSION]: clusterName, ...where }).map(([k, v]) => `${k} = '${v}'`);
  return `SELECT SUM(${metric}) FROM "${METRIC_NAMESPACE}" WHERE ${clauses.join(' AND ')}`;
}
