import type { NodeRecord } from '../domain/node.js';
import { actOnStrays } from './actions.js';
import { decideStrayLeases, instanceIdOfArn, type StrayPartition } from './gc-plan.js';
import type { ScanKey } from './lease-partitions.js';
import type { PacedReconcileDeps } from './paced.js';

/** The search's state in the schedules partition. */
export const STRAY_SCAN_CURSOR = 'reconcile-stray-scan';
/**
 * A Scan of the whole table at most once a day. Partitions with leases and no node item only arise from a
 * crash between a partition delete and a late lease put, or an operator's delete; a day bounds how long such
 * leases (which no pod can claim: no node item, no pool) sit there, and the Scan is the one read that grows with
 * the table's size.
 */
export const DEFAULT_STRAY_SCAN_PERIOD_MS = 86_400_000;
/** Items per Scan page (DynamoDB's Limit counts items read, before the filter). */
const SCAN_PAGE_ITEMS = 1000;

interface StrayScanState {
  readonly cycleStartedAtMs: number;
  readonly cycles: number;
  /** A scan is under way; `from` is where its next page starts (absent: the table's start). */
  readonly scanning: boolean;
  readonly from?: ScanKey;
}

export interface StraySearchReport {
  /** Scan pages read this run (0 between scans). */
  readonly scanPages: number;
  readonly scanning: boolean;
  /** Partitions judged this run: those the Scan found plus every marked one (the second look). */
  readonly judged: number;
  readonly strayLeases: readonly StrayPartition[];
}

/**
 * The stray-partition search, incremental: a paced, eventually consistent Scan (a page at a time, carried over
 * runs, started at most every `strayScanPeriodMs`) is the first look; it marks what it finds. Every run then
 * judges the marked partitions alone with consistent reads (a lease is still there, the node item still
 * missing, EC2 still shows the instance gone), so the second look comes a run later, not a Scan later, and
 * costs a few reads per marked partition. A partition is removed only when both looks agree, at least
 * `minMarkAgeMs` apart (decideStrayLeases).
 */
export async function searchStrays(
  deps: PacedReconcileDeps,
  run: { nowMs: number; deadlineMs: number; minMarkAgeMs: number; skip: ReadonlySet<string> },
): Promise<StraySearchReport> {
  const partitions = deps.leasePartitions;
  if (!partitions) return { scanPages: 0, scanning: false, judged: 0, strayLeases: [] };
  const stored = await deps.cursor.load<StrayScanState>(STRAY_SCAN_CURSOR);
  let version = stored?.version ?? 0;
  let state: StrayScanState = stored?.state ?? { cycleStartedAtMs: 0, cycles: 0, scanning: false };
  const periodMs = deps.strayScanPeriodMs ?? DEFAULT_STRAY_SCAN_PERIOD_MS;
  if (!state.scanning && (!stored || run.nowMs >= state.cycleStartedAtMs + periodMs))
    state = { cycleStartedAtMs: run.nowMs, cycles: state.cycles + 1, scanning: true };

  const found = new Set<string>();
  let scanPages = 0;
  while (state.scanning && deps.clock.nowMs() < run.deadlineMs) {
    const page = await partitions.scanPage(state.from, SCAN_PAGE_ITEMS);
    scanPages += 1;
    for (const p of page.partitions)
      if (p.leases && (p.nodePhase === undefined || p.nodePhase === 'GONE')) found.add(p.instanceArn);
    const next: StrayScanState = { cycleStartedAtMs: state.cycleStartedAtMs, cycles: state.cycles, scanning: false };
    state = page.next ? { ...next, scanning: true, from: page.next } : next;
    if (!(await deps.cursor.save(STRAY_SCAN_CURSOR, state, version))) {
      deps.logger.warn('another run moved the stray-search cursor; this run stops scanning', {});
      break;
    }
    version += 1;
  }

  // The second look (and the first look's check): leases before the node item, both consistent.
  const marks = await partitions.strayMarks();
  const judge = [...new Set([...found, ...marks.keys()])].filter((arn) => !run.skip.has(arn));
  const withLeases: string[] = [];
  const nodes: NodeRecord[] = [];
  for (const arn of judge) {
    if (!(await partitions.hasLeaseItems(arn))) continue;
    withLeases.push(arn);
    const node = await deps.store.getNode(arn).catch(() => undefined);
    if (node) nodes.push(node);
  }
  const states = await deps.ec2.describeInstanceStates(withLeases.flatMap((arn) => instanceIdOfArn(arn) ?? []));
  const strayLeases = decideStrayLeases({
    nowMs: run.nowMs,
    leasePartitions: withLeases,
    nodes,
    instanceStates: states,
    strayMarks: marks,
    minMarkAgeMs: run.minMarkAgeMs,
  });
  await actOnStrays(deps, strayLeases, marks, run.nowMs);
  return { scanPages, scanning: state.scanning, judged: judge.length, strayLeases };
}
