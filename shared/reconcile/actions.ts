import type { NodeRecord } from '../domain/node.js';
import { isEc2Error } from '../ec2/errors.js';
import { ENI_TAGS } from '../ec2/tags.js';
import type { EniGcDecision, StrayPartition } from './gc-plan.js';
import { staleStrayMarks } from './gc-plan.js';
import type { ReconcilerDeps } from './reconciler.js';

/**
 * The reconciler's acts, shared by the whole-cluster pass and the paced one. Each act stands alone: one ENI or
 * one node that fails is logged and left for the next pass, never aborting the others.
 */
export interface EniGcOutcome {
  readonly marked: string[];
  readonly unmarked: string[];
  readonly deleted: string[];
  readonly deleteFailed: string[];
}

export async function actOnEniGc(
  deps: ReconcilerDeps,
  decisions: readonly EniGcDecision[],
  nowMs: number,
): Promise<EniGcOutcome> {
  const { ec2, logger } = deps;
  const ids = (action: string): string[] => decisions.filter((d) => d.action === action).map((d) => d.eniId);
  const tagStep = async (eniIds: string[], run: (batch: string[]) => Promise<void>): Promise<string[]> => {
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
  };
  const marked = await tagStep(ids('mark'), (batch) =>
    ec2.createTags(batch, { [ENI_TAGS.gcMarkedAt]: new Date(nowMs).toISOString() }),
  );
  const unmarked = await tagStep(ids('unmark'), (batch) => ec2.deleteTags(batch, [ENI_TAGS.gcMarkedAt]));
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
  return { marked, unmarked, deleted, deleteFailed };
}

export interface GoneNodeAct {
  readonly node: NodeRecord;
  readonly action: 'mark' | 'remove' | 'unmark';
}

/** Partitions of instances that no longer exist (seen gone on two passes), and GONE items past retention. */
export async function actOnGoneNodes(
  deps: ReconcilerDeps,
  decisions: readonly GoneNodeAct[],
  instanceStates: ReadonlyMap<string, string>,
  nowMs: number,
): Promise<{ removed: string[]; marked: string[] }> {
  const { store, logger } = deps;
  const removed: string[] = [];
  const marked: string[] = [];
  for (const { node, action } of decisions) {
    const instanceState = instanceStates.get(node.instanceId) ?? 'unknown to EC2';
    try {
      if (action === 'remove') {
        const items = await store.deleteNodePartition(node.instanceArn);
        removed.push(node.instanceArn);
        logger.info('removed the partition of a gone instance', {
          instanceArn: node.instanceArn,
          phase: node.phase,
          instanceState,
          goneSeenAtMs: node.goneSeenAtMs,
          items,
        });
      } else {
        // Conditional on the version read: a node item changed since (a late launch step) is judged next pass.
        const { goneSeenAtMs: _, ...rest } = node;
        await store.updateNode(
          { ...rest, ...(action === 'mark' ? { goneSeenAtMs: nowMs } : {}), updatedAtMs: node.updatedAtMs },
          node.version,
        );
        if (action === 'mark') marked.push(node.instanceArn);
        logger.info(
          action === 'mark' ? 'instance seen gone; its partition goes if a later pass agrees' : 'instance is back',
          { instanceArn: node.instanceArn, instanceState },
        );
      }
    } catch (err) {
      logger.warn(`failed to ${action} the partition of a gone instance; next pass retries`, {
        instanceArn: node.instanceArn,
        err,
      });
    }
  }
  return { removed, marked };
}

/** Leases no node item stands for: report, mark (first look), remove (second look); stale marks cleared. */
export async function actOnStrays(
  deps: ReconcilerDeps,
  strays: readonly StrayPartition[],
  strayMarks: ReadonlyMap<string, number>,
  nowMs: number,
): Promise<void> {
  const { store, logger } = deps;
  for (const stray of strays) {
    try {
      if (stray.action === 'report') {
        logger.warn('leases without a node item on a live instance; left for an operator', { ...stray });
      } else if (stray.action === 'mark') {
        await deps.leasePartitions?.markStray(stray.instanceArn, nowMs);
        logger.info('leases without a node item on a gone instance; removed if a later pass agrees', { ...stray });
      } else if (stray.action === 'remove') {
        const items = await store.deleteNodePartition(stray.instanceArn);
        // The GONE item is the audit trail and the guard against late launch events: put it back.
        if (stray.goneNode) await store.createNode({ ...stray.goneNode, version: 1 });
        if (strayMarks.has(stray.instanceArn)) await deps.leasePartitions?.clearStrayMark(stray.instanceArn);
        logger.warn('removed leases no node item stands for', { ...stray, items });
      }
    } catch (err) {
      logger.warn(`failed to ${stray.action} stray leases; next pass retries`, {
        instanceArn: stray.instanceArn,
        err,
      });
    }
  }
  for (const arn of staleStrayMarks(strays, strayMarks)) {
    try {
      await deps.leasePartitions?.clearStrayMark(arn);
    } catch (err) {
      logger.warn('failed to clear a stray-lease mark; next pass retries', { instanceArn: arn, err });
    }
  }
}
