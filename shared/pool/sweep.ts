import type { NodeRef } from '../lease-store/port.js';
import { METRIC_DIMENSIONS, METRIC_NAMES } from '../metrics.js';
import { pacedWalk } from '../schedule/paced-walk.js';
import type { PoolDeps } from './deps.js';
import { dropPoolDue, loadPoolDue } from './pool-due.js';
import { manageNodePool, type NodePoolReport } from './pool-manager.js';

export interface SweepReport {
  readonly nodes: number;
  readonly lowOnLeases: number;
  readonly failed: readonly string[];
  readonly reports: readonly NodePoolReport[];
  /** READY nodes whose claimable count was within the watermarks: no pass needed. */
  readonly skippedInBand?: number;
  /** Nodes the census listed as due, passed in full at this cycle's start. */
  readonly due?: number;
  readonly cycle?: number;
  readonly cycleDone?: boolean;
  readonly stoppedEarly?: boolean;
}

export interface SweepOptions {
  readonly concurrency?: number;
  /** Clock time (ms) after which the sweep starts no new page: the Lambda's deadline less a margin. */
  readonly deadlineMs?: number;
  /** Node refs per page of the paced walk (the cursor is saved after each). Default 100. */
  readonly pageSize?: number;
}

/** The cursor's name in the schedules partition. */
export const POOL_SWEEP_CURSOR = 'pool-sweep';
/** One safety-net visit per READY node per hour (the stream reacts to every claim and release). */
export const DEFAULT_POOL_SWEEP_CYCLE_MS = 3_600_000;
/**
 * The scheduled safety net. Stream records drive the pool (every claim and release runs a pass on its node);
 * the schedule catches what a lost stream batch missed. With a cursor store (the Lambda), it walks the node
 * index at most once per cycle, carrying on where the last run stopped, and on each READY node first asks the
 * claimable index for a count (one eventually consistent COUNT Query, a fraction of a read unit): only a
 * node outside its watermarks gets a full pass. What only a full pass catches on a node in band (interrupted
 * releases, recorded addresses without a lease) the reconciler's daily census finds from its one Scan and
 * lists as due (pool-due.ts); each cycle's first page passes the due nodes in full. `fullPassEveryCycles`
 * brings back a full pass of every node every that many cycles. Without a cursor store (tests, the local
 * cloud) every call passes every READY node.
 */
export async function sweepPools(deps: PoolDeps, options: SweepOptions = {}): Promise<SweepReport> {
  const concurrency = options.concurrency ?? 4;
  const reports: NodePoolReport[] = [];
  const failed: string[] = [];
  let nodes = 0;
  let skippedInBand = 0;
  let due = 0;
  const { warmLowLeases, warmHighLeases } = deps.config;

  const pass = async (ref: Pick<NodeRef, 'instanceArn'>, full: boolean): Promise<boolean> => {
    try {
      if (!full) {
        const claimable = await deps.store.countClaimable(ref.instanceArn, deps.clock.nowMs());
        if (claimable >= warmLowLeases && claimable <= warmHighLeases) {
          skippedInBand += 1;
          return true;
        }
      }
      reports.push(await manageNodePool(deps, ref.instanceArn));
      return true;
    } catch (err) {
      failed.push(ref.instanceArn);
      deps.logger.error('pool pass failed; the next run retries', { instanceArn: ref.instanceArn, err });
      return false;
    }
  };
  const visit = async (refs: readonly NodeRef[], full: boolean): Promise<void> => {
    const ready = refs.filter((r) => r.phase === 'READY');
    nodes += ready.length;
    let next = 0;
    const worker = async (): Promise<void> => {
      for (let ref = ready[next++]; ref; ref = ready[next++]) await pass(ref, full);
    };
    await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, ready.length)) }, worker));
  };

  let walk: { cycle?: number; cycleDone: boolean; stoppedEarly: boolean } = { cycleDone: true, stoppedEarly: false };
  const cursor = deps.sweepCursor;
  if (cursor) {
    const every = deps.fullPassEveryCycles;
    // Once a cycle, at its first page: the census's due list (a node not READY is skipped by its pass).
    const passDue = async (): Promise<void> => {
      const arns = await loadPoolDue(cursor);
      const passed: string[] = [];
      // Up to 2,000 nodes: past the deadline the rest wait for the next cycle, or a run the Lambda's timeout
      // ends would drop none of them and the next run would start the same list again, for ever.
      for (const instanceArn of arns) {
        if (deps.clock.nowMs() >= (options.deadlineMs ?? Number.POSITIVE_INFINITY)) break;
        due += 1;
        if (await pass({ instanceArn }, true)) passed.push(instanceArn);
      }
      await dropPoolDue(cursor, deps.logger, passed);
    };
    walk = await pacedWalk(
      { store: deps.store, cursor, clock: deps.clock, logger: deps.logger },
      POOL_SWEEP_CURSOR,
      {
        cyclePeriodMs: deps.sweepCycleMs ?? DEFAULT_POOL_SWEEP_CYCLE_MS,
        deadlineMs: options.deadlineMs ?? Number.POSITIVE_INFINITY,
        ...(options.pageSize !== undefined ? { pageSize: options.pageSize } : {}),
      },
      async (refs, cycle, span) => {
        if (span.from.shard === 0 && span.from.afterArn === undefined) await passDue();
        await visit(refs, every !== undefined && cycle % every === 0);
      },
    );
  } else {
    for (let from = deps.store.listNodeRefs({ shard: 0 }); ; ) {
      const page = await from;
      await visit(page.refs, true);
      if (!page.next) break;
      from = deps.store.listNodeRefs(page.next);
    }
  }

  // After the pass: a node topped up in this sweep is not low any more; one at its limits still is.
  const lowOnLeases = reports.filter((r) => r.counts && r.counts.claimableNow + r.leased.length < warmLowLeases).length;
  deps.metrics?.add(
    METRIC_NAMES.nodesLowOnClaimableLeases,
    { [METRIC_DIMENSIONS.cluster]: deps.config.clusterName },
    lowOnLeases,
  );
  return { nodes, lowOnLeases, failed, reports, skippedInBand, due, ...walk };
}
