import type { ControlPlaneConfig } from '../config/control-plane.js';
import type { Lease } from '../domain/lease.js';
import type { NodeRecord } from '../domain/node.js';
import type { Ec2Eni } from '../ec2/port.js';
import { ENI_TAGS } from '../ec2/tags.js';
import { PartitionTooLargeError } from '../lease-store/partition-bound.js';
import type { NodeRef } from '../lease-store/port.js';
import { NODE_INDEX, nodeIndexShard } from '../lease-store/table.js';
import { METRIC_DIMENSIONS, METRIC_NAMES } from '../metrics.js';
import { addPoolDue, poolPassWanted } from '../pool/pool-due.js';
import type { SweepCursorStore } from '../schedule/cursor.js';
import { pacedWalk, type WalkSpan } from '../schedule/paced-walk.js';
import { actOnEniGc, actOnGoneNodes, type GoneNodeAct } from './actions.js';
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
 * rarer paced Scan (stray-search.ts).
 */
export async function reconcilePaced(deps: PacedReconcileDeps, deadlineMs: number): Promise<PacedReconcileReport> {
  const { ec2, store, config, logger } = deps;
  const nowMs = deps.clock.nowMs();
  const minMarkAgeMs = deps.minMarkAgeMs ?? DEFAULT_MIN_MARK_AGE_MS;
  const enis = await ec2.describeNetworkInterfaces({ tags: { [ENI_TAGS.cluster]: config.clusterName } });

  // ENI collection: only unattached ENIs can be collected, so only their owners' node items are read.
  const candidates = enis.filter((e) => e.status === 'available' && e.attachment === undefined);
  const owners = candidates.length > 0 ? await ownersOf(candidates) : [];
  const gcStates = await ec2.describeInstanceStates([
    ...new Set(candidates.flatMap((e) => e.tags[ENI_TAGS.instance] ?? [])),
  ]);
  const eniGc = decideEniGc({
    nowMs,
    minEniAgeMs: config.eniMinAgeForGcMs,
    minMarkAgeMs,
    enis,
    nodes: owners,
    instanceStates: gcStates,
  });
  const gc = await actOnEniGc(deps, eniGc, nowMs);

  const attachedTo = new Map<string, Ec2Eni[]>();
  for (const eni of enis) {
    const id = eni.attachment?.instanceId;
    if (id) attachedTo.set(id, [...(attachedTo.get(id) ?? []), eni]);
  }
  const removed: string[] = [];
  const goneMarked: string[] = [];
  const drift: DriftItem[] = [];
  let nodesChecked = 0;
  const every = deps.driftFullEveryCycles ?? (deps.leasePartitions ? undefined : DEFAULT_DRIFT_FULL_EVERY_CYCLES);
  const checkedThisRun = new Set<string>();
  // Each shard's digests as this run last read or saved them: a shard spans many pages (about 300 nodes a
  // shard at 5,000 nodes, 100 a page), and reading its item once a page made a cycle's reads grow with nodes².
  const shards = new Map<string, { state: SeenState; version: number; dirty: boolean }>();

  const visit = async (refs: readonly NodeRef[], cycle: number, span: WalkSpan): Promise<void> => {
    const full = every !== undefined && cycle % every === 0;
    const present = new Set(refs.map((r) => r.instanceId));
    const arnPrefix = refs[0]?.instanceArn.slice(0, refs[0].instanceArn.lastIndexOf('/') + 1);
    // Attached ENIs on instances whose node item would sit in this page's span but does not: eni-without-node.
    const orphans = arnPrefix
      ? [...attachedTo.keys()].filter((id) => !present.has(id) && inSpan(`${arnPrefix}${id}`, span))
      : [];
    const states = await ec2.describeInstanceStates([...present, ...orphans]);

    const gone = decideGoneNodes({
      nowMs,
      minAgeMs: config.eniMinAgeForGcMs,
      minMarkAgeMs,
      ...(deps.goneRetentionMs !== undefined ? { goneRetentionMs: deps.goneRetentionMs } : {}),
      nodes: refs,
      instanceStates: states,
    });
    const acts: GoneNodeAct[] = [];
    for (const { node: ref, action } of gone) {
      // The index may lag: decide again on a consistent read of the item before changing it.
      const node = await store.getNode(ref.instanceArn);
      if (!node) continue;
      const again = decideGoneNodes({ ...goneInput(), nodes: [node], instanceStates: states })[0];
      if (again?.action === action) acts.push({ node, action });
    }
    const outcome = await actOnGoneNodes(deps, acts, states, nowMs);
    removed.push(...outcome.removed);
    goneMarked.push(...outcome.marked);

    for (const id of orphans)
      for (const eni of attachedTo.get(id) ?? [])
        if (isInstanceLive(states.get(id)) && !(await store.getNode(`${arnPrefix}${id}`)))
          drift.push({ kind: 'eni-without-node', instanceId: id, eniId: eni.eniId });

    const seenOf = async (arn: string) => {
      const shard = Number(nodeIndexShard(arn).slice('nodes#'.length));
      let entry = shards.get(`${cycle}:${shard}`);
      if (!entry) {
        // Saved a cycle (15 min) ago at the latest: an eventual read sees it, for half the units of the largest
        // items the reconciler reads (~90 bytes a node); a stale one would only make the save below refuse.
        const stored = await deps.cursor.load<SeenState>(seenStateName(shard), { eventual: true });
        const fresh = full && stored?.state.fullCycle !== cycle;
        entry = {
          state: fresh || !stored ? { fullCycle: full ? cycle : -1, entries: {} } : stored.state,
          version: stored?.version ?? 0,
          dirty: fresh,
        };
        shards.set(`${cycle}:${shard}`, entry);
      }
      return entry;
    };
    const done = new Set(outcome.removed);
    for (const ref of refs) {
      if (ref.phase !== 'READY' || done.has(ref.instanceArn) || !isInstanceLive(states.get(ref.instanceId))) continue;
      const attached = attachedTo.get(ref.instanceId) ?? [];
      const seen = await seenOf(ref.instanceArn);
      if (!full && seen.state.entries[ref.instanceArn] === nodeDigest(ref, attached)) continue;
      nodesChecked += 1;
      checkedThisRun.add(ref.instanceArn);
      // A first look at half the read units; only a node it does not find clean is read again, consistently,
      // before anything is reported or its digest dropped (what an eventual read can miss is a write of the
      // last second, like the EC2 snapshot beside it).
      let node = await store.getNode(ref.instanceArn, EVENTUAL);
      let found = node ? await checkNode(node, attached, states, EVENTUAL) : undefined;
      if (!found?.clean) {
        node = await store.getNode(ref.instanceArn);
        found = node ? await checkNode(node, attached, states) : undefined;
      }
      const entries = seen.state.entries;
      if (found?.clean && node) entries[ref.instanceArn] = nodeDigest(node, attached);
      else delete entries[ref.instanceArn];
      seen.dirty = true;
      drift.push(...(found?.items ?? []));
    }
    for (const [key, seen] of shards) {
      if (!seen.dirty) continue;
      const shard = Number(key.slice(key.indexOf(':') + 1));
      // Saved after each page, so a run stopped at its deadline keeps what it checked.
      if (await deps.cursor.save(seenStateName(shard), seen.state, seen.version)) {
        seen.version += 1;
        seen.dirty = false;
        continue;
      }
      // Another run saving the same shard meanwhile only costs its nodes a check next cycle; read it afresh.
      shards.delete(key);
      logger.warn('another run saved the drift digests; this run leaves them', { shard });
    }
  };

  const walk = await pacedWalk(
    { store, cursor: deps.cursor, clock: deps.clock, logger },
    RECONCILE_CURSOR,
    {
      cyclePeriodMs: deps.cycleMs ?? DEFAULT_RECONCILE_CYCLE_MS,
      deadlineMs,
      ...(deps.pageSize !== undefined ? { pageSize: deps.pageSize } : {}),
    },
    visit,
  );
  // The census's first looks: every whole partition it reads, once a day, against this run's EC2 snapshot.
  const suspects = new Set<string>();
  const poolDue: string[] = [];
  const look: CensusLook = ({ instanceArn, node, leases, illFormedLeases }) => {
    if (node?.phase !== 'READY' || removed.includes(instanceArn)) return;
    const attached = attachedTo.get(node.instanceId) ?? [];
    // Every instance is taken as live here: the consistent check reads EC2's states for the few it keeps.
    const live = new Map([[node.instanceId, 'running']]);
    if (illFormedLeases > 0 || !driftOf(node, leases, attached, live).clean) suspects.add(instanceArn);
    if (illFormedLeases > 0 || poolPassWanted(deps, node, leases, nowMs)) poolDue.push(instanceArn);
  };
  const strays = await searchStrays(deps, { nowMs, deadlineMs, minMarkAgeMs, skip: new Set(removed) }, look);
  await addPoolDue(deps.cursor, logger, poolDue);
  const confirm = [...suspects].filter((arn) => !checkedThisRun.has(arn));
  if (confirm.length > 0) {
    const states = await ec2.describeInstanceStates(confirm.flatMap((arn) => instanceIdOfArn(arn) ?? []));
    const unclean: string[] = [];
    for (const arn of confirm) {
      const node = await store.getNode(arn);
      if (node?.phase !== 'READY' || !isInstanceLive(states.get(node.instanceId))) continue;
      const found = await checkNode(node, attachedTo.get(node.instanceId) ?? [], states);
      drift.push(...found.items);
      if (!found.clean) unclean.push(arn);
    }
    // A node with drift is read every walk cycle until it is clean, as one the walk found.
    await forgetDigests(unclean);
  }
  reportDrift(deps, drift);
  const dims = { [METRIC_DIMENSIONS.cluster]: config.clusterName };
  const metric = (name: (typeof METRIC_NAMES)[keyof typeof METRIC_NAMES], value: number): void =>
    deps.metrics?.add(name, dims, value);
  metric(METRIC_NAMES.reconcilerEnisMarked, gc.marked.length);
  metric(METRIC_NAMES.reconcilerEnisDeleted, gc.deleted.length);
  metric(METRIC_NAMES.reconcilerEniDeleteFailures, gc.deleteFailed.length);
  metric(METRIC_NAMES.reconcilerPartitionsRemoved, removed.length);
  metric(METRIC_NAMES.reconcilerStrayLeasePartitions, strays.strayLeases.length);
  metric(METRIC_NAMES.reconcilerOversizedPartitions, strays.oversized.length);
  const report: PacedReconcileReport = {
    enisSeen: enis.length,
    ...gc,
    partitionsRemoved: removed,
    partitionsMarkedGone: goneMarked,
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
  logger.info('paced reconcile run done', {
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
  return report;

  function goneInput() {
    return {
      nowMs,
      minAgeMs: config.eniMinAgeForGcMs,
      minMarkAgeMs,
      ...(deps.goneRetentionMs !== undefined ? { goneRetentionMs: deps.goneRetentionMs } : {}),
    };
  }

  /** Drift on one node; clean when nothing is found and no lease is too young to judge. */
  async function checkNode(
    node: NodeRecord,
    attached: readonly Ec2Eni[],
    states: ReadonlyMap<string, string>,
    read: { eventual?: boolean } = {},
  ) {
    try {
      return driftOf(node, await store.listLeases(node.instanceArn, read), attached, states);
    } catch (err) {
      // A node's flood of its own partition fails its own check, never the run (and every node after it).
      if (!(err instanceof PartitionTooLargeError)) throw err;
      logger.warn(err.message, { instanceArn: node.instanceArn });
      return { items: [], clean: false };
    }
  }

  function driftOf(
    node: NodeRecord,
    leases: readonly Lease[],
    attached: readonly Ec2Eni[],
    states: ReadonlyMap<string, string>,
  ): { items: DriftItem[]; clean: boolean } {
    const graceMs = deps.driftGraceMs ?? DEFAULT_DRIFT_GRACE_MS;
    const recorded = new Set(node.enis.flatMap((e) => e.eniId ?? []));
    const items = detectDrift({
      nowMs,
      graceMs,
      nodes: [node],
      leasesByNode: new Map([[node.instanceArn, leases]]),
      enis: [...attached, ...enis.filter((e) => recorded.has(e.eniId) && !attached.includes(e))],
      instanceStates: states,
    }).filter((d) => d.kind !== 'eni-without-node');
    const young = leases.some((l) => nowMs - l.createdAtMs < graceMs);
    return { items, clean: items.length === 0 && !young };
  }

  /** Drops the stored digests of these nodes, so the walk reads them again next cycle. */
  async function forgetDigests(arns: readonly string[]): Promise<void> {
    const byShard = new Map<number, string[]>();
    for (const arn of arns) {
      const shard = Number(nodeIndexShard(arn).slice('nodes#'.length));
      byShard.set(shard, [...(byShard.get(shard) ?? []), arn]);
    }
    for (const [shard, members] of byShard) {
      const stored = await deps.cursor.load<SeenState>(seenStateName(shard));
      if (!stored || members.every((arn) => stored.state.entries[arn] === undefined)) continue;
      const entries = { ...stored.state.entries };
      for (const arn of members) delete entries[arn];
      if (!(await deps.cursor.save(seenStateName(shard), { ...stored.state, entries }, stored.version)))
        logger.warn('another run saved the drift digests; the census leaves them', { shard });
    }
  }

  /**
   * Node items of the instances tagged on collectable ENIs; every node item when one has no instance tag (it
   * could be recorded on any node), which the lifecycle never leaves.
   */
  async function ownersOf(collectable: readonly Ec2Eni[]): Promise<NodeRecord[]> {
    const ids = collectable.map((e) => e.tags[ENI_TAGS.instance]);
    if (ids.some((id) => id === undefined)) return store.listNodes();
    const first = (await store.listNodeRefs({ shard: 0 }, 1)).refs[0];
    if (!first) return [];
    const prefix = first.instanceArn.slice(0, first.instanceArn.lastIndexOf('/') + 1);
    const nodes = await Promise.all([...new Set(ids)].map((id) => store.getNode(`${prefix}${id}`)));
    return nodes.filter((n): n is NodeRecord => n !== undefined);
  }
}

/** Whether the index places `arn` in the page that covered `span` (after `from`, up to and including `next`). */
export function inSpan(arn: string, span: WalkSpan): boolean {
  const shard = Number(nodeIndexShard(arn).slice('nodes#'.length));
  const { from, next } = span;
  if (shard < from.shard || (shard === from.shard && from.afterArn !== undefined && arn <= from.afterArn)) return false;
  if (!next) return shard < NODE_INDEX.shards;
  if (next.afterArn === undefined) return shard < next.shard;
  return shard < next.shard || (shard === next.shard && arn <= next.afterArn);
}
