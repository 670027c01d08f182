import type { NodeRef } from '../lease-store/port.js';
import { METRIC_DIMENSIONS, METRIC_NAMES } from '../metrics.js';
import { pacedWalk } from '../schedule/paced-walk.js';
import type { PoolDeps } from './deps.js';
import { manageNodePool, type NodePoolReport } from './pool-manager.js';

export interface SweepReport {
  readonly nodes: number;
  readonly lowOnLeases: number;
  readonly failed: readonly string[];
  readonly reports: readonly NodePoolReport[];
  /** READY nodes whose claimable count was within the watermarks: no pass needed. */
  readonly skippedInBand?: number;
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
/** Every 24th cycle passes every READY node in full (interrupted releases, unleased recorded addresses). */
export const DEFAULT_FULL_PASS_EVERY_CYCLES = 24;

/**
 * The scheduled safety net. Stream records drive the pool (every claim and release runs a pass on its node);
 * the schedule catches what a lost stream batch missed. With a cursor store (the Lambda), it walks the node
 * index at most once per cycle, carrying on where the last run stopped, and on each READY node first asks the
 * claimable index for a count (one eventually consistent COUNT Query, a fraction of a read unit): only a
 * node outside its watermarks gets a full pass, except on every `fullPassEveryCycles`-th cycle, which passes
 * all. Without a cursor store (tests, the local cloud) every call passes every READY node.
 */
export async function sweepPools(deps: PoolDeps, options: SweepOptions = {}): Promise<SweepReport> {
  const concurrency = options.concurrency ?? 4;
  const reports: NodePoolReport[] = [];
  const failed: string[] = [];
  let nodes = 0;
  let skippedInBand = 0;
  const { warmLowLeases, warmHighLeases } = deps.config;

  const pass = async (ref: NodeRef, full: boolean): Promise<void> => {
    try {
      if (!full) {
        const claimable = await deps.store.countClaimable(ref.instanceArn, deps.clock.nowMs());
        if (claimable >= warmLowLeases && claimable <= warmHighLeases) {
          skippedInBand += 1;
          return;
        }
      }
      reports.push(await manageNodePool(deps, ref.instanceArn));
    } catch (err) {
      failed.push(ref.instanceArn);
      deps.logger.error('pool pass failed; the next run retries', { instanceArn: ref.instanceArn, err });
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
    const every = deps.fullPassEveryCycles ?? DEFAULT_FULL_PASS_EVERY_CYCLES;
    walk = await pacedWalk(
      { store: deps.store, cursor, clock: deps.clock, logger: deps.logger },
      POOL_SWEEP_CURSOR,
      {
        cyclePeriodMs: deps.sweepCycleMs ?? DEFAULT_POOL_SWEEP_CYCLE_MS,
        deadlineMs: options.deadlineMs ?? Number.POSITIVE_INFINITY,
        ...(options.pageSize !== undefined ? { pageSize: options.pageSize } : {}),
      },
      (refs, cycle) => visit(refs, cycle % every === 0),
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
  return { nodes, lowOnLeases, failed, reports, skippedInBand, ...walk };
}
