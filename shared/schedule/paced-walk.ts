import type { Clock } from '../clock.js';
import type { LeaseStore, NodeCursor, NodeRef } from '../lease-store/port.js';
import type { Logger } from '../log.js';
import type { SweepCursorStore, SweepState } from './cursor.js';

export interface PacedWalkOptions {
  /** A new cycle starts at most this often; between cycles a run only reads its cursor. */
  readonly cyclePeriodMs: number;
  /** Clock time (ms) after which no new page is started. */
  readonly deadlineMs: number;
  /** Node refs per page; the cursor is saved after each page. Default 100. */
  readonly pageSize?: number;
}

export interface PacedWalkReport {
  /** Refs handed to `visit` this run. */
  readonly visited: number;
  /** The cycle this run worked on (0-based), or undefined when it was idle between cycles. */
  readonly cycle?: number;
  readonly cycleDone: boolean;
  /** Stopped by the deadline (or by another run owning the cursor) with the cycle unfinished. */
  readonly stoppedEarly: boolean;
}

/**
 * The stretch of the index one page covers: after `from`, up to and including `next` (or to the index's end).
 * Every node item in it is in the page, so a visitor can tell "no node item" from "not in this page".
 */
export interface WalkSpan {
  readonly from: NodeCursor;
  readonly next?: NodeCursor;
}

/**
 * A schedule's walk over every node in the node index, paced: one cycle per `cyclePeriodMs`, carried over
 * from run to run through a cursor, stopping at the deadline. So what a schedule reads per hour follows the
 * number of nodes and the cycle period, never the runs × the table's size, and a table larger than one run
 * can read is still covered: the next run starts where this one stopped.
 */
export async function pacedWalk(
  deps: { store: LeaseStore; cursor: SweepCursorStore; clock: Clock; logger: Logger },
  name: string,
  options: PacedWalkOptions,
  visit: (refs: readonly NodeRef[], cycle: number, span: WalkSpan) => Promise<void>,
): Promise<PacedWalkReport> {
  const { store, cursor, clock } = deps;
  const nowMs = clock.nowMs();
  // Most runs fall between cycles: an eventually consistent read tells them so for half the units. A stale one
  // can only hide a cycle another run has started; a run that will act reads the cursor again, consistently.
  const glance = await cursor.load(name, { eventual: true });
  if (glance && !glance.state.position && nowMs < glance.state.cycleStartedAtMs + options.cyclePeriodMs)
    return { visited: 0, cycleDone: true, stoppedEarly: false };
  const stored = await cursor.load(name);
  let version = stored?.version ?? 0;
  let state: SweepState | undefined = stored?.state;
  if (!state || (!state.position && nowMs >= state.cycleStartedAtMs + options.cyclePeriodMs)) {
    state = { cycleStartedAtMs: nowMs, position: { shard: 0 }, cycles: (state?.cycles ?? 0) + 1 };
  }
  if (!state.position) return { visited: 0, cycleDone: true, stoppedEarly: false };
  const cycle = state.cycles - 1;
  let visited = 0;
  while (state.position && clock.nowMs() < options.deadlineMs) {
    const page = await store.listNodeRefs(state.position, options.pageSize ?? 100);
    await visit(page.refs, cycle, { from: state.position, ...(page.next ? { next: page.next } : {}) });
    visited += page.refs.length;
    const next: SweepState = { cycleStartedAtMs: state.cycleStartedAtMs, cycles: state.cycles };
    state = page.next ? { ...next, position: page.next } : next;
    // Conditional on the version read: a second run that overlapped this one gives way instead of rewinding.
    if (!(await cursor.save(name, state, version))) {
      deps.logger.warn('another run moved the schedule cursor; this run stops', { name });
      return { visited, cycle, cycleDone: false, stoppedEarly: true };
    }
    version += 1;
  }
  return { visited, cycle, cycleDone: !state.position, stoppedEarly: state.position !== undefined };
}
