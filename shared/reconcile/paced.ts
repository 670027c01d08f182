import type { ControlPlaneConfig } from '../config/control-plane.js';
import type { Lease } from '../domain/lease.js';
import type { NodeRecord } from '../domain/node.js';
import type { Ec2Eni } from '../ec2/port.js';
import { ENI_TAGS } from '../ec2/tags.js';
import { PartitionTooLargeError } from '../lease-store/partition-bound.js';
import type { NodeRef } from '../lease-store/port.js';
import { NODE_INDEX, nodeIndexShardNumber } from '../lease-store/table.js';
import type { Logger } from '../log.js';
import { METRIC_DIMENSIONS, METRIC_NAMES, type MetricName } from '../metrics.js';
import { addPoolDue, poolPassWanted } from '../pool/pool-due.js';
import type { SweepCursorStore } from '../schedule/cursor.js';
import { type PacedWalkReport, pacedWalk, type WalkSpan } from '../schedule/paced-walk.js';
import { actOnEniGc, actOnGoneNodes, type EniGcOutcome, type GoneNodeAct } from './actions.js';
import { type DriftItem, detectDrift } from './drift.js';
import { decideEniGc, decideGoneNodes, instanceIdOfArn, isInstanceLive, type StrayPartition } from './gc-plan.js';
import {
  DEFAULT_DRIFT_GRACE_MS,
  DEFAULT_MIN_MARK_AGE_MS,
  type ReconcileReport,
  type ReconcilerDeps,
  reportDrift,
} from './reconciler.js';
import { nodeDigest, type SeenState, seenStateName } from './seen.js';
import { type CensusLook, type StraySearchReport, searchStrays } from './stray-search.js';

/** The cursor's name in the schedules partition. */
export const RECONCILE_CURSOR = 'reconcile';
const EVENTUAL = { eventual: true } as const;
/** A walk of every node at most every 15 minutes: gone nodes go within two cycles, drift shows within one. */
export const DEFAULT_RECONCILE_CYCLE_MS = 900_000;
/**
 * Without the census (no lease partitions to scan), every 96th cycle (a day at the default cycle) reads every
 * READY node's leases whatever its digest: the bound for drift the digest cannot see (a lease item changed by
 * hand with EC2 and the node item untouched). With it, the census's daily look at every node is that bound.
 */
export const DEFAULT_DRIFT_FULL_EVERY_CYCLES = 96;

export interface PacedReconcileDeps extends ReconcilerDeps {
  /** The whole configuration: the census judges the pool's watermarks too. */
  readonly config: ControlPlaneConfig;
  readonly cursor: SweepCursorStore;
  readonly cycleMs?: number;
  readonly driftFullEveryCycles?: number;
  readonly strayScanPeriodMs?: number;
  /** Node refs per page of the walk (the cursor and the digests are saved after each). Default 100. */
  readonly pageSize?: number;
  /** Items per page of the census Scan. Default 1000 (stray-search.ts). */
  readonly censusPageItems?: number;
}

export interface PacedReconcileReport extends ReconcileReport {
  /** The stray partitions judged this run (the same as `strays.strayLeases`). */
  readonly strayLeases: readonly StrayPartition[];
  /** Node refs visited this run, and of the READY ones how many had their leases read (digest changed). */
  readonly nodesVisited: number;
  readonly nodesChecked: number;
  readonly cycle?: number;
  readonly cycleDone: boolean;
  readonly stoppedEarly: boolean;
  readonly strays: StraySearchReport;
  /** READY nodes the census's first look found wanting a full pool pass, handed to the pool sweep (pool-due.ts). */
  readonly poolDue: readonly string[];
}

/**
 * The scheduled reconciler at scale. Every run: the ENI collection on this cluster's ENIs (EC2 only; node items
 * are read just for the ENIs it might delete). Once per cycle, paced across runs by a cursor and a deadline: a
 * walk of the node index that judges gone nodes and drift page by page. A READY node's leases are read only
 * when its digest (node-item version + what EC2 shows attached) differs from the one its last clean check
 * stored, or on a full cycle; the stream's passes remain the main path. The stray-partition search is its own
 * rarer paced Scan (stray-search.ts), whose looks at whole partitions the run confirms against EC2.
 */
export async function reconcilePaced(deps: PacedReconcileDeps, deadlineMs: number): Promise<PacedReconcileReport> {
  const nowMs = deps.clock.nowMs();
  const enis = await deps.ec2.describeNetworkInterfaces({ tags: { [ENI_TAGS.cluster]: deps.config.clusterName } });
  const run: PacedRun = {
    deps,
    nowMs,
    minMarkAgeMs: deps.minMarkAgeMs ?? DEFAULT_MIN_MARK_AGE_MS,
    enis,
    attachedTo: attachedByInstance(enis),
  };
  const gc = await collectEnis(run);
  const walked = await walkNodes(run, deadlineMs);
  const census = await censusConfirmation(run, deadlineMs, walked);
  const drift = [...walked.drift, ...census.drift];
  reportDrift(deps, drift);
  const { walk, removed, nodesChecked } = walked;
  const { strays, poolDue } = census;
  publishMetrics(run, gc, removed.length, strays);
  deps.logger.info('paced reconcile run done', {
    enisSeen: enis.length,
    deleted: gc.deleted.length,
    nodesVisited: walk.visited,
    nodesChecked,
    cycle: walk.cycle,
    stoppedEarly: walk.stoppedEarly,
    drift: drift.length,
    strayLeases: strays.strayLeases.length,
    oversizedPartitions: strays.oversized.length,
    poolDue: poolDue.length,
  });
  return {
    enisSeen: enis.length,
    ...gc,
    partitionsRemoved: removed,
    partitionsMarkedGone: walked.goneMarked,
    drift,
    nodesVisited: walk.visited,
    nodesChecked,
    ...(walk.cycle !== undefined ? { cycle: walk.cycle } : {}),
    cycleDone: walk.cycleDone,
    stoppedEarly: walk.stoppedEarly,
    strays,
    strayLeases: strays.strayLeases,
    poolDue,
  };
}

/** What every part of one run works with: its deps, its time, and the EC2 snapshot it judges against. */
interface PacedRun {
  readonly deps: PacedReconcileDeps;
  readonly nowMs: number;
  readonly minMarkAgeMs: number;
  /** This cluster's ENIs as EC2 showed them at the run's start. */
  readonly enis: readonly Ec2Eni[];
  /** The attached ones, by instance id. */
  readonly attachedTo: ReadonlyMap<string, Ec2Eni[]>;
}

function attachedByInstance(enis: readonly Ec2Eni[]): Map<string, Ec2Eni[]> {
  const attachedTo = new Map<string, Ec2Eni[]>();
  for (const eni of enis) {
    const id = eni.attachment?.instanceId;
    if (id) attachedTo.set(id, [...(attachedTo.get(id) ?? []), eni]);
  }
  return attachedTo;
}

// ENI collection

/** Only unattached ENIs can be collected, so only their owners' node items are read. */
async function collectEnis(run: PacedRun): Promise<EniGcOutcome> {
  const { deps, nowMs, enis } = run;
  const candidates = enis.filter((e) => e.status === 'available' && e.attachment === undefined);
  const owners = candidates.length > 0 ? await ownersOf(deps.store, candidates) : [];
  const gcStates = await deps.ec2.describeInstanceStates([
    ...new Set(candidates.flatMap((e) => e.tags[ENI_TAGS.instance] ?? [])),
  ]);
  const eniGc = decideEniGc({
    nowMs,
    minEniAgeMs: deps.config.eniMinAgeForGcMs,
    minMarkAgeMs: run.minMarkAgeMs,
    enis,
    nodes: owners,
    instanceStates: gcStates,
  });
  return actOnEniGc(deps, eniGc, nowMs);
}

/**
 * Node items of the instances tagged on collectable ENIs; every node item when one has no instance tag (it
 * could be recorded on any node), which the lifecycle never leaves.
 */
async function ownersOf(store: PacedReconcileDeps['store'], collectable: readonly Ec2Eni[]): Promise<NodeRecord[]> {
  const ids = collectable.map((e) => e.tags[ENI_TAGS.instance]);
  if (ids.some((id) => id === undefined)) return store.listNodes();
  const first = (await store.listNodeRefs({ shard: 0 }, 1)).refs[0];
  if (!first) return [];
  const prefix = arnPrefixOf(first.instanceArn);
  const nodes = await Promise.all([...new Set(ids)].map((id) => store.getNode(`${prefix}${id}`)));
  return nodes.filter((n): n is NodeRecord => n !== undefined);
}

/** An instance ARN up to its id: `arn:aws:ec2:<region>:<account>:instance/`. */
function arnPrefixOf(instanceArn: string): string {
  return instanceArn.slice(0, instanceArn.lastIndexOf('/') + 1);
}

// The walk

/** What the walk did this run. */
interface Walked extends WalkTally {
  readonly walk: PacedWalkReport;
}

interface WalkTally {
  readonly removed: string[];
  readonly goneMarked: string[];
  readonly drift: DriftItem[];
  nodesChecked: number;
  /** READY nodes whose leases the walk read this run: the census need not confirm them again. */
  readonly checked: Set<string>;
}

/** One cycle's walk of the node index, paced across runs: gone nodes, then drift, page by page. */
async function walkNodes(run: PacedRun, deadlineMs: number): Promise<Walked> {
  const { deps } = run;
  const every = deps.driftFullEveryCycles ?? (deps.leasePartitions ? undefined : DEFAULT_DRIFT_FULL_EVERY_CYCLES);
  const digests = new DigestCache(deps.cursor, deps.logger);
  const walked: WalkTally = { removed: [], goneMarked: [], drift: [], nodesChecked: 0, checked: new Set() };
  const visit = async (refs: readonly NodeRef[], cycle: number, span: WalkSpan): Promise<void> => {
    const full = every !== undefined && cycle % every === 0;
    const present = new Set(refs.map((r) => r.instanceId));
    const arnPrefix = refs[0] ? arnPrefixOf(refs[0].instanceArn) : undefined;
    // Attached ENIs on instances whose node item would sit in this page's span but does not: eni-without-node.
    const orphans = arnPrefix
      ? [...run.attachedTo.keys()].filter((id) => !present.has(id) && inSpan(`${arnPrefix}${id}`, span))
      : [];
    const states = await deps.ec2.describeInstanceStates([...present, ...orphans]);
    const outcome = await judgeGoneNodes(run, refs, states);
    walked.removed.push(...outcome.removed);
    walked.goneMarked.push(...outcome.marked);
    if (arnPrefix) walked.drift.push(...(await orphanDrift(run, arnPrefix, orphans, states)));
    const live = refs.filter(
      (ref) =>
        ref.phase === 'READY' &&
        !outcome.removed.includes(ref.instanceArn) &&
        isInstanceLive(states.get(ref.instanceId)),
    );
    for (const ref of live)
      await checkWalkedNode(run, ref, states, await digests.of(ref.instanceArn, cycle, full), walked);
    // Saved after each page, so a run stopped at its deadline keeps what it checked.
    await digests.saveChanged();
  };
  const walk = await pacedWalk(
    { store: deps.store, cursor: deps.cursor, clock: deps.clock, logger: deps.logger },
    RECONCILE_CURSOR,
    {
      cyclePeriodMs: deps.cycleMs ?? DEFAULT_RECONCILE_CYCLE_MS,
      deadlineMs,
      ...(deps.pageSize !== undefined ? { pageSize: deps.pageSize } : {}),
    },
    visit,
  );
  return { walk, ...walked };
}

async function judgeGoneNodes(
  run: PacedRun,
  refs: readonly NodeRef[],
  states: ReadonlyMap<string, string>,
): Promise<{ removed: string[]; marked: string[] }> {
  const { deps, nowMs } = run;
  const input = {
    nowMs,
    minAgeMs: deps.config.eniMinAgeForGcMs,
    minMarkAgeMs: run.minMarkAgeMs,
    ...(deps.goneRetentionMs !== undefined ? { goneRetentionMs: deps.goneRetentionMs } : {}),
  };
  const acts: GoneNodeAct[] = [];
  for (const { node: ref, action } of decideGoneNodes({ ...input, nodes: refs, instanceStates: states })) {
    // The index may lag: decide again on a consistent read of the item before changing it.
    const node = await deps.store.getNode(ref.instanceArn);
    if (!node) continue;
    const again = decideGoneNodes({ ...input, nodes: [node], instanceStates: states })[0];
    if (again?.action === action) acts.push({ node, action });
  }
  return actOnGoneNodes(deps, acts, states, nowMs);
}

/** Live instances with ENIs of this cluster attached and no node item where the index would place one. */
async function orphanDrift(
  run: PacedRun,
  arnPrefix: string,
  orphans: readonly string[],
  states: ReadonlyMap<string, string>,
): Promise<DriftItem[]> {
  const drift: DriftItem[] = [];
  for (const id of orphans)
    for (const eni of run.attachedTo.get(id) ?? [])
      if (isInstanceLive(states.get(id)) && !(await run.deps.store.getNode(`${arnPrefix}${id}`)))
        drift.push({ kind: 'eni-without-node', instanceId: id, eniId: eni.eniId });
  return drift;
}

/** Reads a live READY node's leases unless its digest says nothing changed since its last clean check. */
async function checkWalkedNode(
  run: PacedRun,
  ref: NodeRef,
  states: ReadonlyMap<string, string>,
  seen: ShardDigests,
  walked: WalkTally,
): Promise<void> {
  const attached = run.attachedTo.get(ref.instanceId) ?? [];
  if (!seen.full && seen.state.entries[ref.instanceArn] === nodeDigest(ref, attached)) return;
  walked.nodesChecked += 1;
  walked.checked.add(ref.instanceArn);
  // A first look at half the read units; only a node it does not find clean is read again, consistently,
  // before anything is reported or its digest dropped (what an eventual read can miss is a write of the
  // last second, like the EC2 snapshot beside it).
  let node = await run.deps.store.getNode(ref.instanceArn, EVENTUAL);
  let found = node ? await checkNode(run, node, attached, states, EVENTUAL) : undefined;
  if (!found?.clean) {
    node = await run.deps.store.getNode(ref.instanceArn);
    found = node ? await checkNode(run, node, attached, states) : undefined;
  }
  const entries = seen.state.entries;
  if (found?.clean && node) entries[ref.instanceArn] = nodeDigest(node, attached);
  else delete entries[ref.instanceArn];
  seen.dirty = true;
  walked.drift.push(...(found?.items ?? []));
}

/** One shard's digests as this run last read or saved them. */
interface ShardDigests {
  readonly shard: number;
  /** A full cycle: every node is read whatever its digest. */
  readonly full: boolean;
  state: SeenState;
  version: number;
  dirty: boolean;
}

/**
 * The walk's digest cache. A shard spans many pages (about 300 nodes a shard at 5,000 nodes, 100 a page), and
 * reading its item once a page made a cycle's reads grow with nodes².
 */
class DigestCache {
  private readonly shards = new Map<string, ShardDigests>();

  constructor(
    private readonly cursor: SweepCursorStore,
    private readonly logger: Logger,
  ) {}

  async of(arn: string, cycle: number, full: boolean): Promise<ShardDigests> {
    const shard = nodeIndexShardNumber(arn);
    const key = `${cycle}:${shard}`;
    let entry = this.shards.get(key);
    if (!entry) {
      // Saved a cycle (15 min) ago at the latest: an eventual read sees it, for half the units of the largest
      // items the reconciler reads (~90 bytes a node); a stale one would only make the save below refuse.
      const stored = await this.cursor.load<SeenState>(seenStateName(shard), { eventual: true });
      const fresh = full && stored?.state.fullCycle !== cycle;
      entry = {
        shard,
        full,
        state: fresh || !stored ? { fullCycle: full ? cycle : -1, entries: {} } : stored.state,
        version: stored?.version ?? 0,
        dirty: fresh,
      };
      this.shards.set(key, entry);
    }
    return entry;
  }

  async saveChanged(): Promise<void> {
    for (const [key, seen] of this.shards) {
      if (!seen.dirty) continue;
      if (await this.cursor.save(seenStateName(seen.shard), seen.state, seen.version)) {
        seen.version += 1;
        seen.dirty = false;
        continue;
      }
      // Another run saving the same shard meanwhile only costs its nodes a check next cycle; read it afresh.
      this.shards.delete(key);
      this.logger.warn('another run saved the drift digests; this run leaves them', { shard: seen.shard });
    }
  }
}

// The census confirmation

/**
 * The census's first looks: every whole partition it reads, once a day, against this run's EC2 snapshot. READY
 * nodes it finds wanting a full pool pass go to the pool sweep; those it suspects of drift, and the walk did not
 * check this run, are checked again consistently.
 */
async function censusConfirmation(
  run: PacedRun,
  deadlineMs: number,
  walked: Walked,
): Promise<{ strays: StraySearchReport; poolDue: string[]; drift: DriftItem[] }> {
  const { deps, nowMs } = run;
  const suspects = new Set<string>();
  const poolDue: string[] = [];
  const look: CensusLook = ({ instanceArn, node, leases, illFormedLeases }) => {
    if (node?.phase !== 'READY' || walked.removed.includes(instanceArn)) return;
    const attached = run.attachedTo.get(node.instanceId) ?? [];
    // Every instance is taken as live here: the consistent check reads EC2's states for the few it keeps.
    const live = new Map([[node.instanceId, 'running']]);
    if (illFormedLeases > 0 || !driftOf(run, node, leases, attached, live).clean) suspects.add(instanceArn);
    if (illFormedLeases > 0 || poolPassWanted(deps, node, leases, nowMs)) poolDue.push(instanceArn);
  };
  const scope = { nowMs, deadlineMs, minMarkAgeMs: run.minMarkAgeMs, skip: new Set(walked.removed) };
  const strays = await searchStrays(deps, scope, look);
  await addPoolDue(deps.cursor, deps.logger, poolDue);
  const drift = await confirmSuspects(
    run,
    [...suspects].filter((arn) => !walked.checked.has(arn)),
  );
  return { strays, poolDue, drift };
}

async function confirmSuspects(run: PacedRun, confirm: readonly string[]): Promise<DriftItem[]> {
  if (confirm.length === 0) return [];
  const { store, ec2 } = run.deps;
  const states = await ec2.describeInstanceStates(confirm.flatMap((arn) => instanceIdOfArn(arn) ?? []));
  const drift: DriftItem[] = [];
  const unclean: string[] = [];
  for (const arn of confirm) {
    const node = await store.getNode(arn);
    if (node?.phase !== 'READY' || !isInstanceLive(states.get(node.instanceId))) continue;
    const found = await checkNode(run, node, run.attachedTo.get(node.instanceId) ?? [], states);
    drift.push(...found.items);
    if (!found.clean) unclean.push(arn);
  }
  // A node with drift is read every walk cycle until it is clean, as one the walk found.
  await forgetDigests(run.deps, unclean);
  return drift;
}

/** Drops the stored digests of these nodes, so the walk reads them again next cycle. */
async function forgetDigests(deps: PacedReconcileDeps, arns: readonly string[]): Promise<void> {
  const byShard = new Map<number, string[]>();
  for (const arn of arns) {
    const shard = nodeIndexShardNumber(arn);
    byShard.set(shard, [...(byShard.get(shard) ?? []), arn]);
  }
  for (const [shard, members] of byShard) {
    const stored = await deps.cursor.load<SeenState>(seenStateName(shard));
    if (!stored || members.every((arn) => stored.state.entries[arn] === undefined)) continue;
    const entries = { ...stored.state.entries };
    for (const arn of members) delete entries[arn];
    if (!(await deps.cursor.save(seenStateName(shard), { ...stored.state, entries }, stored.version)))
      deps.logger.warn('another run saved the drift digests; the census leaves them', { shard });
  }
}

// Drift on one node

interface NodeDrift {
  readonly items: DriftItem[];
  /** Nothing found, and no lease too young to judge. */
  readonly clean: boolean;
}

async function checkNode(
  run: PacedRun,
  node: NodeRecord,
  attached: readonly Ec2Eni[],
  states: ReadonlyMap<string, string>,
  read: { eventual?: boolean } = {},
): Promise<NodeDrift> {
  try {
    return driftOf(run, node, await run.deps.store.listLeases(node.instanceArn, read), attached, states);
  } catch (err) {
    // A node's flood of its own partition fails its own check, never the run (and every node after it).
    if (!(err instanceof PartitionTooLargeError)) throw err;
    run.deps.logger.warn(err.message, { instanceArn: node.instanceArn });
    return { items: [], clean: false };
  }
}

function driftOf(
  run: PacedRun,
  node: NodeRecord,
  leases: readonly Lease[],
  attached: readonly Ec2Eni[],
  states: ReadonlyMap<string, string>,
): NodeDrift {
  const { nowMs } = run;
  const graceMs = run.deps.driftGraceMs ?? DEFAULT_DRIFT_GRACE_MS;
  const recorded = new Set(node.enis.flatMap((e) => e.eniId ?? []));
  const items = detectDrift({
    nowMs,
    graceMs,
    nodes: [node],
    leasesByNode: new Map([[node.instanceArn, leases]]),
    enis: [...attached, ...run.enis.filter((e) => recorded.has(e.eniId) && !attached.includes(e))],
    instanceStates: states,
  }).filter((d) => d.kind !== 'eni-without-node');
  const young = leases.some((l) => nowMs - l.createdAtMs < graceMs);
  return { items, clean: items.length === 0 && !young };
}

function publishMetrics(run: PacedRun, gc: EniGcOutcome, partitionsRemoved: number, strays: StraySearchReport): void {
  const dims = { [METRIC_DIMENSIONS.cluster]: run.deps.config.clusterName };
  const metric = (name: MetricName, value: number): void => run.deps.metrics?.add(name, dims, value);
  metric(METRIC_NAMES.reconcilerEnisMarked, gc.marked.length);
  metric(METRIC_NAMES.reconcilerEnisDeleted, gc.deleted.length);
  metric(METRIC_NAMES.reconcilerEniDeleteFailures, gc.deleteFailed.length);
  metric(METRIC_NAMES.reconcilerPartitionsRemoved, partitionsRemoved);
  metric(METRIC_NAMES.reconcilerStrayLeasePartitions, strays.strayLeases.length);
  metric(METRIC_NAMES.reconcilerOversizedPartitions, strays.oversized.length);
}

/** Whether the index places `arn` in the page that covered `span` (after `from`, up to and including `next`). */
export function inSpan(arn: string, span: WalkSpan): boolean {
  const shard = nodeIndexShardNumber(arn);
  const { from, next } = span;
  if (shard < from.shard || (shard === from.shard && from.afterArn !== undefined && arn <= from.afterArn)) return false;
  if (!next) return shard < NODE_INDEX.shards;
  if (next.afterArn === undefined) return shard < next.shard;
  return shard < next.shard || (shard === next.shard && arn <= next.afterArn);
}
