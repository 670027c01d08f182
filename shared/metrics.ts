import type { Logger } from './log.js';

/**
 * Counters published as CloudWatch Embedded Metric Format lines through the structured logger: Lambda ships
 * stdout/stderr to CloudWatch Logs, which turns each `_aws` line into metrics — no PutMetricData call, no
 * extra latency (what Powertools Metrics does). Counts accumulate in memory and `flush()` writes one line per
 * metric and dimension set (call it at the end of each invocation); `totals()` keeps running sums for tests
 * and benchmarks.
 */
export type MetricUnit = 'Count' | 'Milliseconds';
export type Dimensions = Readonly<Record<string, string>>;

export const METRICS_NAMESPACE = 'VpcLease';

/**
 * Every metric the control plane emits, by name: emitters and the CDK alarms (infra/construct/monitoring.ts)
 * import these, so a rename cannot silently leave an alarm watching nothing. The dimensions each carries
 * besides `Service` are noted; `ClusterName` is on every metric an alarm watches, so alarms of two clusters
 * in one account and Region stay apart.
 */
export const METRIC_NAMES = {
  /** `{Action}`: every EC2 call (shared/ec2/sdk-ec2.ts). */
  ec2Calls: 'Ec2Calls',
  /** `{Action}`: SDK retries hidden inside calls. */
  ec2Retries: 'Ec2Retries',
  /** `{ClusterName, Action, Kind}`: failed EC2 calls by error kind (`throttling`, …). */
  ec2Errors: 'Ec2Errors',
  /** `{Action}`: every Auto Scaling call. */
  autoScalingCalls: 'AutoScalingCalls',
  launchCompleted: 'LaunchCompleted',
  /** `{ClusterName, Reason}`: one per ABANDON (shared/lifecycle/abandon.ts). */
  launchAbandoned: 'LaunchAbandoned',
  nodeGone: 'NodeGone',
  /**
   * `{ClusterName, Reason, SubnetId}`: one per ENI create EC2 refused for room, Reason its code
   * (`InsufficientFreeAddressesInSubnet`, `InsufficientCidrBlocks`); the ENI then tries the next subnet
   * (shared/lifecycle/subnet-fallback.ts). A launch that no subnet can hold is also a `LaunchAbandoned`
   * with Reason `subnets-exhausted`.
   */
  subnetFull: 'SubnetFull',
  /** `{Flow}`: events re-enqueued to wait. */
  requeued: 'Requeued',
  /** `{ClusterName}` for the pool metrics (shared/pool/pool-manager.ts). */
  poolAddressesLeased: 'PoolAddressesLeased',
  poolAddressesReleased: 'PoolAddressesReleased',
  poolAddressesAdopted: 'PoolAddressesAdopted',
  poolShortfall: 'PoolShortfall',
  /** READY nodes below the low watermark after a sweep. */
  nodesLowOnClaimableLeases: 'NodesLowOnClaimableLeases',
  /** `{ClusterName}` for the reconciler metrics (shared/reconcile/reconciler.ts). */
  reconcilerEnisMarked: 'ReconcilerEnisMarked',
  reconcilerEnisDeleted: 'ReconcilerEnisDeleted',
  reconcilerEniDeleteFailures: 'ReconcilerEniDeleteFailures',
  reconcilerPartitionsRemoved: 'ReconcilerPartitionsRemoved',
  reconcilerStrayLeasePartitions: 'ReconcilerStrayLeasePartitions',
  /**
   * `{ClusterName}`: partitions the census left unread for holding more than the control plane ever writes
   * (shared/lease-store/partition-bound.ts). Normally zero: a node is flooding its own partition.
   */
  reconcilerOversizedPartitions: 'ReconcilerOversizedPartitions',
  driftLeaseWithoutAddress: 'DriftLeaseWithoutAddress',
  driftAddressWithoutLease: 'DriftAddressWithoutLease',
  driftEniWithoutNode: 'DriftEniWithoutNode',
  driftEniDetached: 'DriftEniDetached',
  /**
   * `{ClusterName, Reason}`: a lease (or item) from a node's partition that the control plane refused to act
   * on (shared/pool/lease-trust.ts; `ill-formed` from the store). Normally zero: a node is misbehaving.
   */
  untrustedLeaseRejected: 'UntrustedLeaseRejected',
} as const;

export type MetricName = (typeof METRIC_NAMES)[keyof typeof METRIC_NAMES];

/** Dimension names the alarms filter on. */
export const METRIC_DIMENSIONS = {
  service: 'Service',
  cluster: 'ClusterName',
  action: 'Action',
  kind: 'Kind',
  reason: 'Reason',
  subnet: 'SubnetId',
} as const;

interface Entry {
  readonly name: string;
  readonly unit: MetricUnit;
  readonly dimensions: Dimensions;
  value: number;
}

function keyOf(name: string, dimensions: Dimensions): string {
  const dims = Object.keys(dimensions)
    .sort()
    .map((k) => `${k}=${dimensions[k]}`)
    .join(',');
  return `${name}|${dims}`;
}

export class Metrics {
  private pending = new Map<string, Entry>();
  private readonly running = new Map<string, Entry>();

  constructor(
    private readonly logger: Logger,
    private readonly service: string,
    private readonly nowMs: () => number = Date.now,
    private readonly namespace: string = METRICS_NAMESPACE,
  ) {}

  add(name: string, dimensions: Dimensions = {}, value = 1, unit: MetricUnit = 'Count'): void {
    const key = keyOf(name, dimensions);
    for (const map of [this.pending, this.running]) {
      const entry = map.get(key);
      if (entry) entry.value += value;
      else map.set(key, { name, unit, dimensions: { ...dimensions }, value });
    }
  }

  /** Running sum of a metric over every dimension set matching `where` (since construction or reset). */
  total(name: string, where: Dimensions = {}): number {
    let sum = 0;
    for (const entry of this.running.values()) {
      if (entry.name !== name) continue;
      if (Object.entries(where).every(([k, v]) => entry.dimensions[k] === v)) sum += entry.value;
    }
    return sum;
  }

  /** Running sums of a metric keyed by one dimension's value, e.g. EC2 calls by action. */
  totalsBy(name: string, dimension: string): Record<string, number> {
    const out: Record<string, number> = {};
    for (const entry of this.running.values()) {
      const value = entry.dimensions[dimension];
      if (entry.name !== name || value === undefined) continue;
      out[value] = (out[value] ?? 0) + entry.value;
    }
    return out;
  }

  resetTotals(): void {
    this.running.clear();
  }

  /** Writes one EMF line per pending metric and dimension set, then forgets them. */
  flush(): void {
    const pending = this.pending;
    this.pending = new Map();
    for (const entry of pending.values()) {
      const dimensionNames = ['Service', ...Object.keys(entry.dimensions).sort()];
      this.logger.info('metric', {
        _aws: {
          Timestamp: this.nowMs(),
          CloudWatchMetrics: [
            {
              Namespace: this.namespace,
              Dimensions: [dimensionNames],
              Metrics: [{ Name: entry.name, Unit: entry.unit }],
            },
          ],
        },
        Service: this.service,
        ...entry.dimensions,
        [entry.name]: entry.value,
      });
    }
  }
}
