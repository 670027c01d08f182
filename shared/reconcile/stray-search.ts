import type { NodeRecord } from '../domain/node.js';
import { PARTITION_READ_MAX_BYTES, PartitionTooLargeError } from '../lease-store/partition-bound.js';
import { actOnStrays } from './actions.js';
import { decideStrayLeases, instanceIdOfArn, type StrayPartition } from './gc-plan.js';
import type { ScanKey, ScannedPartition } from './lease-partitions.js';
import type { PacedReconcileDeps } from './paced.js';

/** The census's state in the schedules partition (the name predates the census: the state is the same). */
export const STRAY_SCAN_CURSOR = 'reconcile-stray-scan';
/**
 * The census: one eventually consistent Scan of the whole table at most once a day, the one read that grows
 * with the table's size, shared by three daily first looks: partitions with leases and no node item (only a
 * crash between a partition delete and a late lease put, or an operator's delete, leaves one), drift the
 * digests cannot see, and what only a full pool pass catches. A day bounds how long each waits to be seen.
 */
export const DEFAULT_STRAY_SCAN_PERIOD_MS = 86_400_000;
/** Items per Scan page (DynamoDB's Limit counts items read): more than any one partition holds. */
const SCAN_PAGE_ITEMS = 1000;

interface StrayScanState {
  readonly cycleStartedAtMs: number;
  readonly cycles: number;
  /** A scan is under way; `from` is where its next page starts (absent: the table's start). */
  readonly scanning: boolean;
  readonly from?: ScanKey;
  /** The partition `from` is inside of, past the read bound: the scan leaves the rest of it unread. */
  readonly skipping?: string;
}

export interface StraySearchReport {
  /** Scan pages read this run (0 between scans). */
  readonly scanPages: number;
  readonly scanning: boolean;
  /** Partitions the census looked at whole this run. */
  readonly partitionsSeen: number;
  /** Partitions judged this run: those the Scan found plus every marked one (the second look). */
  readonly judged: number;
  readonly strayLeases: readonly StrayPartition[];
  /**
   * Partitions past PARTITION_READ_MAX_BYTES this run: a node's flood, left unread and not looked at; judged
   * for a stray only when their node item is missing or GONE.
   */
  readonly oversized: readonly string[];
}

/** The census's view of one partition, whole: every item of it that the Scan read. */
export type CensusLook = (partition: ScannedPartition) => void;

/** A node item that is there and not GONE: its partition is no stray (decideStrayLeases's rule). */
function isLivePhase(phase: string | undefined): boolean {
  return phase !== undefined && phase !== 'GONE';
}

/** Two pages' sightings of one partition (a page ended inside it) as one. */
function joined(a: ScannedPartition, b: ScannedPartition): ScannedPartition {
  const node = b.node ?? a.node;
  const nodePhase = b.nodePhase ?? a.nodePhase;
  return {
    instanceArn: a.instanceArn,
    leases: [...a.leases, ...b.leases],
    illFormedLeases: a.illFormedLeases + b.illFormedLeases,
    bytes: a.bytes + b.bytes,
    ...(node ? { node } : {}),
    ...(nodePhase !== undefined ? { nodePhase } : {}),
    lastKey: b.lastKey,
  };
}

/**
 * The stray-partition search over the census: a paced, eventually consistent Scan (a page at a time, carried
 * over runs, started at most every `strayScanPeriodMs`) hands every whole partition to `look` (the drift and
 * pool first looks) and marks those with leases and no node item. The cursor is saved after the last whole
 * partition, so a run that stops inside one leaves it to the next whole. Every run then judges the marked
 * partitions alone with consistent reads (a lease is still there, the node item still missing, EC2 still
 * shows the instance gone), so the second look comes a run later, not a Scan later. A partition is removed
 * only when both looks agree, at least `minMarkAgeMs` apart (decideStrayLeases).
 */
export async function searchStrays(
  deps: PacedReconcileDeps,
  run: { nowMs: number; deadlineMs: number; minMarkAgeMs: number; skip: ReadonlySet<string> },
  look: CensusLook = () => {},
): Promise<StraySearchReport> {
  const partitions = deps.leasePartitions;
  if (!partitions)
    return { scanPages: 0, scanning: false, partitionsSeen: 0, judged: 0, strayLeases: [], oversized: [] };
  const periodMs = deps.strayScanPeriodMs ?? DEFAULT_STRAY_SCAN_PERIOD_MS;
  // Between scans an eventual read says so for half the units; a run that will scan reads the state again.
  const glance = await deps.cursor.load<StrayScanState>(STRAY_SCAN_CURSOR, { eventual: true });
  const idle = glance && !glance.state.scanning && run.nowMs < glance.state.cycleStartedAtMs + periodMs;
  const stored = idle ? glance : await deps.cursor.load<StrayScanState>(STRAY_SCAN_CURSOR);
  let version = stored?.version ?? 0;
  let state: StrayScanState = stored?.state ?? { cycleStartedAtMs: 0, cycles: 0, scanning: false };
  if (!state.scanning && (!stored || run.nowMs >= state.cycleStartedAtMs + periodMs))
    state = { cycleStartedAtMs: run.nowMs, cycles: state.cycles + 1, scanning: true };

  const found = new Set<string>();
  let scanPages = 0;
  let partitionsSeen = 0;
  let from = state.from;
  let skipping = state.skipping;
  const oversized: string[] = [];
  // Oversized partitions with no live node item among what was read: one item read below tells a flood from a stray.
  const unreadNode: string[] = [];
  const leaveUnread = (p: ScannedPartition): void => {
    oversized.push(p.instanceArn);
    if (!isLivePhase(p.nodePhase)) unreadNode.push(p.instanceArn);
    deps.logger.warn(new PartitionTooLargeError(p.instanceArn, p.bytes).message, { instanceArn: p.instanceArn });
  };
  // The page's last partition may go on in the next page: it is looked at once whole.
  let open: ScannedPartition | undefined;
  // Past the deadline a run still reads on until it has finished one partition, or it would never move on.
  while (state.scanning && (deps.clock.nowMs() < run.deadlineMs || (open !== undefined && partitionsSeen === 0))) {
    const page = await partitions.scanPage(from, deps.censusPageItems ?? SCAN_PAGE_ITEMS);
    scanPages += 1;
    // A partition's items are contiguous: the one being skipped can only open the page.
    const whole = page.partitions.filter((p) => p.instanceArn !== skipping);
    if (whole.length > 0 || !page.next) skipping = undefined;
    if (open && whole[0]?.instanceArn === open.instanceArn) whole[0] = joined(open, whole[0]);
    else if (open) whole.unshift(open);
    open = page.next ? whole.pop() : undefined;
    if (open && open.bytes > PARTITION_READ_MAX_BYTES) {
      leaveUnread(open);
      skipping = open.instanceArn;
      open = undefined;
    }
    for (const p of whole) {
      partitionsSeen += 1;
      if (p.bytes > PARTITION_READ_MAX_BYTES) {
        leaveUnread(p);
        continue;
      }
      if (p.leases.length + p.illFormedLeases > 0 && !isLivePhase(p.nodePhase)) found.add(p.instanceArn);
      look(p);
    }
    from = page.next;
    // Nothing held over (or only a partition left unread): the next page's start is where a run resumes.
    const resumeAt = open ? (whole.at(-1)?.lastKey ?? state.from) : page.next;
    const next: StrayScanState = { cycleStartedAtMs: state.cycleStartedAtMs, cycles: state.cycles, scanning: false };
    state = page.next
      ? { ...next, scanning: true, ...(resumeAt ? { from: resumeAt } : {}), ...(skipping ? { skipping } : {}) }
      : next;
    if (!(await deps.cursor.save(STRAY_SCAN_CURSOR, state, version))) {
      deps.logger.warn('another run moved the census cursor; this run stops scanning', {});
      break;
    }
    version += 1;
  }
  // A live node's flood is its own (reported as oversized); without a live node item it may be a stray, judged
  // with both looks like any other.
  for (const arn of unreadNode) {
    const node = await deps.store.getNode(arn).catch(() => undefined);
    if (!isLivePhase(node?.phase)) found.add(arn);
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
  return { scanPages, scanning: state.scanning, partitionsSeen, judged: judge.length, strayLeases, oversized };
}
