import type { Clock } from '../clock.js';
import type { ControlPlaneConfig } from '../config/control-plane.js';
import type { Lease } from '../domain/lease.js';
import type { NodeRecord } from '../domain/node.js';
import { isEc2Error } from '../ec2/errors.js';
import type { Ec2Eni } from '../ec2/port.js';
import { ENI_TAGS } from '../ec2/tags.js';
import type { LeaseStore } from '../lease-store/port.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import { type DriftItem, type DriftKind, detectDrift } from './drift.js';
import type { ReconcileEc2 } from './ec2.js';
import { decideEniGc, decideGoneNodes, GC_MARK_TAG } from './gc-plan.js';

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
  readonly drift: readonly DriftItem[];
}

const DRIFT_METRIC: Record<DriftKind, string> = {
  'lease-without-address': 'DriftLeaseWithoutAddress',
  'address-without-lease': 'DriftAddressWithoutLease',
  'eni-without-node': 'DriftEniWithoutNode',
  'eni-detached': 'DriftEniDetached',
};

/**
 * One reconcile pass: snapshot (this cluster's ENIs, the node items, the instances' states) → decide (pure,
 * gc-plan.ts and drift.ts) → act. Each action stands alone: one ENI or one node that fails is logged and
 * counted and left for the next pass, never aborting the others.
 */
export async function reconcile(deps: ReconcilerDeps): Promise<ReconcileReport> {
  const { ec2, store, config, logger } = deps;
  const nowMs = deps.clock.nowMs();
  const dims = { ClusterName: config.clusterName };
  const metric = (name: string, value = 1): void => deps.metrics?.add(name, dims, value);

  const enis = await ec2.describeNetworkInterfaces({ tags: { [ENI_TAGS.cluster]: config.clusterName } });
  const nodes = await store.listNodes();
  const instanceStates = await ec2.describeInstanceStates(instanceIdsOf(nodes, enis));

  // ENI garbage collection, two passes.
  const decisions = decideEniGc({
    nowMs,
    minEniAgeMs: config.eniMinAgeForGcMs,
    minMarkAgeMs: deps.minMarkAgeMs ?? DEFAULT_MIN_MARK_AGE_MS,
    enis,
    nodes,
    instanceStates,
  });
  const ids = (action: string): string[] => decisions.filter((d) => d.action === action).map((d) => d.eniId);
  const marked = await tagStep(ids('mark'), (batch) =>
    ec2.createTags(batch, { [GC_MARK_TAG]: new Date(nowMs).toISOString() }),
  );
  const unmarked = await tagStep(ids('unmark'), (batch) => ec2.deleteTags(batch, [GC_MARK_TAG]));
  const deleted: string[] = [];
  const deleteFailed: string[] = [];
  for (const eniId of ids('delete')) {
    try {
      await ec2.deleteNetworkInterface(eniId);
      deleted.push(eniId);
      logger.info('deleted leaked ENI', { eniId, reason: 'available and unowned on two passes' });
    } catch (err) {
      if (isEc2Error(err) && /NotFound/.test(err.code)) {
        deleted.push(eniId); // gone already (deleted by someone else between the two looks)
        continue;
      }
      // InvalidNetworkInterface.InUse: attached between our look and the delete — exactly the race the two
      // passes guard against, and EC2's own check caught it. Next pass unmarks it.
      deleteFailed.push(eniId);
      logger.warn('failed to delete leaked ENI; next pass retries', { eniId, err });
    }
  }

  // Partitions of instances that no longer exist.
  const partitionsRemoved: string[] = [];
  for (const node of decideGoneNodes({ nowMs, minAgeMs: config.eniMinAgeForGcMs, nodes, instanceStates })) {
    try {
      const items = await store.deleteNodePartition(node.instanceArn);
      partitionsRemoved.push(node.instanceArn);
      logger.info('removed the partition of a gone instance', {
        instanceArn: node.instanceArn,
        phase: node.phase,
        instanceState: instanceStates.get(node.instanceId) ?? 'unknown to EC2',
        items,
      });
    } catch (err) {
      logger.warn('failed to remove the partition of a gone instance; next pass retries', {
        instanceArn: node.instanceArn,
        err,
      });
    }
  }

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
  for (const item of drift) logger.warn('drift between EC2 and the lease table', { ...item });
  for (const kind of Object.keys(DRIFT_METRIC) as DriftKind[])
    metric(DRIFT_METRIC[kind], drift.filter((d) => d.kind === kind).length);

  metric('ReconcilerEnisMarked', marked.length);
  metric('ReconcilerEnisDeleted', deleted.length);
  metric('ReconcilerEniDeleteFailures', deleteFailed.length);
  metric('ReconcilerPartitionsRemoved', partitionsRemoved.length);
  const report = {
    enisSeen: enis.length,
    marked,
    unmarked,
    deleted,
    deleteFailed,
    partitionsRemoved,
    drift,
  };
  logger.info('reconcile pass done', {
    enisSeen: enis.length,
    marked: marked.length,
    unmarked: unmarked.length,
    deleted: deleted.length,
    deleteFailed: deleteFailed.length,
    partitionsRemoved: partitionsRemoved.length,
    drift: drift.length,
  });
  return report;

  async function tagStep(eniIds: string[], run: (batch: string[]) => Promise<void>): Promise<string[]> {
    const done: string[] = [];
    // CreateTags/DeleteTags take up to 1000 resources; a failed batch only delays its ENIs by one pass.
    for (let i = 0; i < eniIds.length; i += 1000) {
      const batch = eniIds.slice(i, i + 1000);
      try {
        await run(batch);
        done.push(...batch);
      } catch (err) {
        logger.warn('failed to tag ENIs; next pass retries', { eniIds: batch, err });
      }
    }
    return done;
  }
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
