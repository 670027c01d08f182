import type { Clock } from '../clock.js';
import type { ControlPlaneConfig } from '../config/control-plane.js';
import type { Lease } from '../domain/lease.js';
import type { NodeRecord } from '../domain/node.js';
import type { Ec2Eni } from '../ec2/port.js';
import { ENI_TAGS } from '../ec2/tags.js';
import type { LeaseStore } from '../lease-store/port.js';
import type { Logger } from '../log.js';
import { METRIC_DIMENSIONS, METRIC_NAMES, type MetricName, type Metrics } from '../metrics.js';
import { actOnEniGc, actOnGoneNodes, actOnStrays } from './actions.js';
import { type DriftItem, type DriftKind, detectDrift } from './drift.js';
import type { ReconcileEc2 } from './ec2.js';
import {
  decideEniGc,
  decideGoneNodes,
  decideStrayLeases,
  type EniGcDecision,
  type GoneNodeDecision,
  instanceIdOfArn,
  type StrayPartition,
} from './gc-plan.js';
import type { LeasePartitions } from './lease-partitions.js';

export interface ReconcilerDeps {
  readonly ec2: ReconcileEc2;
  readonly store: LeaseStore;
  readonly config: Pick<ControlPlaneConfig, 'clusterName' | 'eniMinAgeForGcMs'>;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly metrics?: Metrics;
  /**
   * How old a mark must be before the ENI goes (the gap between the two looks). Default 60 s: less than the
   * schedule's interval (5 min), so the second scheduled pass deletes, while two passes run back to back by
   * hand (or a duplicated schedule event) do not.
   */
  readonly minMarkAgeMs?: number;
  /** Leases younger than this are not judged for drift. Default 60 s. */
  readonly driftGraceMs?: number;
  /** GONE node items older than this are pruned. Default GONE_RETENTION_MS (gc-plan.ts), a week. */
  readonly goneRetentionMs?: number;
  /** Finds lease partitions without a live node item (a Scan: see lease-partitions.ts). Absent: not looked for. */
  readonly leasePartitions?: LeasePartitions;
}

export const DEFAULT_MIN_MARK_AGE_MS = 60_000;
export const DEFAULT_DRIFT_GRACE_MS = 60_000;

export interface ReconcileReport {
  readonly enisSeen: number;
  readonly marked: readonly string[];
  readonly unmarked: readonly string[];
  readonly deleted: readonly string[];
  /** ENIs that could not be deleted this pass (attached meanwhile, throttled…): retried next pass. */
  readonly deleteFailed: readonly string[];
  readonly partitionsRemoved: readonly string[];
  /** Node items first seen gone this pass: removed by a later pass that agrees (two observations). */
  readonly partitionsMarkedGone: readonly string[];
  /** Partitions whose leases no node item stands for; `action: 'remove'` ones were cleared this pass. */
  readonly strayLeases: readonly StrayPartition[];
  readonly drift: readonly DriftItem[];
}

const DRIFT_METRIC: Record<DriftKind, MetricName> = {
  'lease-without-address': METRIC_NAMES.driftLeaseWithoutAddress,
  'address-without-lease': METRIC_NAMES.driftAddressWithoutLease,
  'eni-without-node': METRIC_NAMES.driftEniWithoutNode,
  'eni-detached': METRIC_NAMES.driftEniDetached,
};

/**
 * What one pass would do, decided on one snapshot (this cluster's ENIs, the lease partitions, the node items,
 * the instances' states): the ENI collection, the partitions of gone instances and the stray-lease partitions.
 * Nothing but reads; `reconcile` acts on it, `vpc-lease gc --dry-run` prints it.
 */
export interface ReconcilePlan {
  readonly nowMs: number;
  readonly enis: readonly Ec2Eni[];
  readonly nodes: readonly NodeRecord[];
  readonly instanceStates: ReadonlyMap<string, string>;
  readonly eniGc: readonly EniGcDecision[];
  readonly goneNodes: readonly GoneNodeDecision[];
  readonly strayLeases: readonly StrayPartition[];
  readonly strayMarks: ReadonlyMap<string, number>;
}

export async function planReconcile(deps: ReconcilerDeps): Promise<ReconcilePlan> {
  const { ec2, store, config } = deps;
  const nowMs = deps.clock.nowMs();
  const minMarkAgeMs = deps.minMarkAgeMs ?? DEFAULT_MIN_MARK_AGE_MS;
  const enis = await ec2.describeNetworkInterfaces({ tags: { [ENI_TAGS.cluster]: config.clusterName } });
  // Lease partitions before node items: a node item is written before its first lease, so a partition seen
  // here whose node item is missing from the later read had none (or lost it meanwhile to a terminate).
  const leasePartitions = (await deps.leasePartitions?.listLeasePartitions()) ?? [];
  const nodes = await store.listNodes();
  const instanceStates = await ec2.describeInstanceStates([
    ...instanceIdsOf(nodes, enis),
    ...leasePartitions.flatMap((arn) => instanceIdOfArn(arn) ?? []),
  ]);
  const eniGc = decideEniGc({ nowMs, minEniAgeMs: config.eniMinAgeForGcMs, minMarkAgeMs, enis, nodes, instanceStates });
  const goneNodes = decideGoneNodes({
    nowMs,
    minAgeMs: config.eniMinAgeForGcMs,
    minMarkAgeMs,
    ...(deps.goneRetentionMs !== undefined ? { goneRetentionMs: deps.goneRetentionMs } : {}),
    nodes,
    instanceStates,
  });
  // A partition this pass removes as a gone node's is not also judged stray.
  const removing = new Set(goneNodes.filter((d) => d.action === 'remove').map((d) => d.node.instanceArn));
  const strayMarks = (await deps.leasePartitions?.strayMarks()) ?? new Map<string, number>();
  const strayLeases = decideStrayLeases({
    nowMs,
    leasePartitions: leasePartitions.filter((arn) => !removing.has(arn)),
    nodes,
    instanceStates,
    strayMarks,
    minMarkAgeMs,
  });
  return { nowMs, enis, nodes, instanceStates, eniGc, goneNodes, strayLeases, strayMarks };
}

/**
 * One reconcile pass: the plan (above), then act on it. Each action stands alone: one ENI or one node that
 * fails is logged and counted and left for the next pass, never aborting the others.
 */
export async function reconcile(deps: ReconcilerDeps): Promise<ReconcileReport> {
  const { store, config, logger } = deps;
  const dims = { [METRIC_DIMENSIONS.cluster]: config.clusterName };
  const metric = (name: MetricName, value = 1): void => deps.metrics?.add(name, dims, value);
  const plan = await planReconcile(deps);
  const { nowMs, enis, nodes, instanceStates, strayLeases, strayMarks } = plan;

  const { marked, unmarked, deleted, deleteFailed } = await actOnEniGc(deps, plan.eniGc, nowMs);
  const gone = await actOnGoneNodes(deps, plan.goneNodes, instanceStates, nowMs);
  const partitionsRemoved = gone.removed;
  await actOnStrays(deps, strayLeases, strayMarks, nowMs);

  // Drift, on the nodes still there.
  const removed = new Set(partitionsRemoved);
  const judged = nodes.filter((n) => !removed.has(n.instanceArn) && n.phase === 'READY');
  const leasesByNode = new Map<string, readonly Lease[]>();
  for (const node of judged) leasesByNode.set(node.instanceArn, await store.listLeases(node.instanceArn));
  const drift = detectDrift({
    nowMs,
    graceMs: deps.driftGraceMs ?? DEFAULT_DRIFT_GRACE_MS,
    nodes: judged,
    leasesByNode,
    enis,
    instanceStates,
  });
  reportDrift(deps, drift);

  metric(METRIC_NAMES.reconcilerEnisMarked, marked.length);
  metric(METRIC_NAMES.reconcilerEnisDeleted, deleted.length);
  metric(METRIC_NAMES.reconcilerEniDeleteFailures, deleteFailed.length);
  metric(METRIC_NAMES.reconcilerPartitionsRemoved, partitionsRemoved.length);
  metric(METRIC_NAMES.reconcilerStrayLeasePartitions, strayLeases.length);
  const report = {
    enisSeen: enis.length,
    marked,
    unmarked,
    deleted,
    deleteFailed,
    partitionsRemoved,
    partitionsMarkedGone: gone.marked,
    strayLeases,
    drift,
  };
  logger.info('reconcile pass done', {
    enisSeen: enis.length,
    marked: marked.length,
    unmarked: unmarked.length,
    deleted: deleted.length,
    deleteFailed: deleteFailed.length,
    partitionsRemoved: partitionsRemoved.length,
    strayLeases: strayLeases.length,
    drift: drift.length,
  });
  return report;
}

function instanceIdsOf(nodes: readonly NodeRecord[], enis: readonly Ec2Eni[]): string[] {
  const ids = new Set(nodes.map((n) => n.instanceId));
  for (const eni of enis) {
    const tagged = eni.tags[ENI_TAGS.instance];
    if (tagged) ids.add(tagged);
    if (eni.attachment?.instanceId) ids.add(eni.attachment.instanceId);
  }
  return [...ids];
}

/** Each drift item logged, and one count per kind (zeros included, so an alarm sees the metric every pass). */
export function reportDrift(
  deps: Pick<ReconcilerDeps, 'logger' | 'metrics' | 'config'>,
  drift: readonly DriftItem[],
): void {
  const dims = { [METRIC_DIMENSIONS.cluster]: deps.config.clusterName };
  for (const item of drift) deps.logger.warn('drift between EC2 and the lease table', { ...item });
  for (const kind of Object.keys(DRIFT_METRIC) as DriftKind[])
    deps.metrics?.add(DRIFT_METRIC[kind], dims, drift.filter((d) => d.kind === kind).length);
}
