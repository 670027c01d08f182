import { parseInstanceArn } from '../domain/arn.js';
import { isInstanceLive } from '../domain/instance-states.js';
import type { NodeRecord } from '../domain/node.js';
import type { Ec2Eni } from '../ec2/port.js';
import { ENI_TAGS } from '../ec2/tags.js';

/**
 * The reconciler's mark: an ENI tag holding the time of the pass that first saw the ENI collectable.
 *
 * Why a tag and not an item in the lease table: the mark lives and dies with the ENI (a deleted ENI leaves no
 * stale mark to prune; an ENI recreated under a new id starts unmarked), it is visible to operators next to
 * the other vpc-lease tags in the console and `describe-network-interfaces`, and it needs no new item type in
 * a table whose partitions belong to instances (and whose keys scope the nodes' IAM). The reconciler's role
 * may create and delete tags on this cluster's ENIs but never the cluster tag itself (lambda-policies.ts).
 */
export const GC_MARK_TAG: string = ENI_TAGS.gcMarkedAt;

export { isInstanceLive } from '../domain/instance-states.js';

export interface EniGcInput {
  readonly nowMs: number;
  /** An ENI younger than this (by its created-at tag) is never touched. */
  readonly minEniAgeMs: number;
  /** A mark must be at least this old before the ENI is deleted: the second pass is a separate look. */
  readonly minMarkAgeMs: number;
  /** ENIs carrying this cluster's tag (DescribeNetworkInterfaces filtered by it). */
  readonly enis: readonly Ec2Eni[];
  readonly nodes: readonly NodeRecord[];
  /** instanceId → EC2 state; an instance EC2 does not know is absent. */
  readonly instanceStates: ReadonlyMap<string, string>;
}

export type EniGcAction = 'mark' | 'unmark' | 'delete' | 'keep';

export interface EniGcDecision {
  readonly eniId: string;
  readonly action: EniGcAction;
  readonly reason: string;
}

export function parseTagTimeMs(value: string | undefined): number | undefined {
  if (value === undefined || value === '') return undefined;
  const ms = /^\d+$/.test(value) ? Number(value) : Date.parse(value);
  return Number.isFinite(ms) ? ms : undefined;
}

const IN_PROGRESS_PHASES = new Set(['PENDING', 'PROVISIONING']);
const RECORDED_ATTACHED_STEPS = new Set(['ATTACHED', 'LEASED']);

/**
 * The first half of ENI garbage collection, as a pure function of one snapshot (cilium's two-pass GC, with
 * the pass state in a tag): an ENI is collected only if it is `available` (never `attaching` or `in-use` —
 * EC2 also refuses to delete an attached ENI), older than the minimum age, not part of a launch still in
 * progress, and was seen collectable by an earlier pass. Anything that stops being collectable loses its mark,
 * so a later detach starts the count again.
 */
export function decideEniGc(input: EniGcInput): EniGcDecision[] {
  const nodesByInstance = new Map(input.nodes.map((n) => [n.instanceId, n]));
  const recorded = new Map<string, NodeRecord>();
  for (const node of input.nodes)
    for (const eni of node.enis) if (eni.eniId && RECORDED_ATTACHED_STEPS.has(eni.step)) recorded.set(eni.eniId, node);

  return input.enis.map((eni): EniGcDecision => {
    const markedAtMs = parseTagTimeMs(eni.tags[GC_MARK_TAG]);
    const marked = GC_MARK_TAG in eni.tags;
    const spare = (reason: string): EniGcDecision => ({ eniId: eni.eniId, action: marked ? 'unmark' : 'keep', reason });

    if (eni.status !== 'available' || eni.attachment !== undefined) return spare(`status ${eni.status}`);
    const createdAtMs = parseTagTimeMs(eni.tags[ENI_TAGS.createdAt]);
    if (createdAtMs !== undefined && input.nowMs - createdAtMs < input.minEniAgeMs)
      return spare('younger than the minimum age');

    const instanceId = eni.tags[ENI_TAGS.instance];
    const owner = instanceId ? nodesByInstance.get(instanceId) : undefined;
    const ownerLive = instanceId !== undefined && isInstanceLive(input.instanceStates.get(instanceId));
    if (
      owner &&
      ownerLive &&
      IN_PROGRESS_PHASES.has(owner.phase) &&
      input.nowMs - owner.updatedAtMs < input.minEniAgeMs
    )
      return spare(`launch of ${owner.instanceId} in progress`);
    const recordedOn = recorded.get(eni.eniId);
    if (recordedOn && isInstanceLive(input.instanceStates.get(recordedOn.instanceId)))
      // Drift, not a leak: a live node's leases point at it. Deleting it would strand them; report instead.
      return spare(`recorded as attached on ${recordedOn.instanceId}`);

    if (!marked || markedAtMs === undefined) return { eniId: eni.eniId, action: 'mark', reason: 'collectable' };
    // Without a created-at tag the age is unknown: the mark stands in for it and must reach the minimum age.
    const wait = createdAtMs === undefined ? input.minEniAgeMs : input.minMarkAgeMs;
    if (input.nowMs - markedAtMs < wait) return { eniId: eni.eniId, action: 'keep', reason: 'marked; waiting' };
    return { eniId: eni.eniId, action: 'delete', reason: 'collectable on two passes' };
  });
}

/**
 * How long a GONE node item stays as the audit trail of a terminated node (type, AZ, ENIs, failure reason,
 * timestamps; `vpc-lease nodes` shows it) before the reconciler prunes it, counted from its last update (the
 * terminate). A week covers a weekend's incident review; the items are small and hold no lease. A constant, not
 * a config field: nothing else depends on it and no operator has asked to tune it.
 */
export const GONE_RETENTION_MS = 7 * 24 * 60 * 60 * 1000;

/** What the gone-node decision reads of a node: all of it is in the node index's projection (NodeRef). */
export type GoneCandidate = Pick<
  NodeRecord,
  'instanceArn' | 'instanceId' | 'phase' | 'createdAtMs' | 'updatedAtMs' | 'goneSeenAtMs'
>;

export interface GoneNodesInput<N extends GoneCandidate = NodeRecord> {
  readonly nowMs: number;
  /** A node item younger than this is kept even if EC2 does not know its instance yet (eventual consistency). */
  readonly minAgeMs: number;
  /** A gone-mark must be at least this old before the partition goes: the second look is a separate pass. */
  readonly minMarkAgeMs: number;
  /** GONE items older than this (since their last update) are pruned. Default GONE_RETENTION_MS. */
  readonly goneRetentionMs?: number;
  readonly nodes: readonly N[];
  readonly instanceStates: ReadonlyMap<string, string>;
}

export interface GoneNodeDecision<N extends GoneCandidate = NodeRecord> {
  readonly node: N;
  /** mark: first seen gone; remove: delete the partition; unmark: the instance is back. */
  readonly action: 'mark' | 'remove' | 'unmark';
}

/**
 * What to do with node partitions whose instance may be gone, in two passes like the ENI GC (DESIGN.md
 * invariant 6: never on one DescribeInstances snapshot, which may lag):
 * - GONE items past their retention are removed (the terminate already drained them; a GONE tombstone only has
 *   to outlive late launch events);
 * - any other item whose instance is terminated or unknown to EC2, that is not brand new, and on which no
 *   terminate is in progress (the lifecycle Lambda finishes what it started: DRAINING → GONE) is marked on the
 *   first pass and removed by a pass at least `minMarkAgeMs` later that still sees it gone;
 * - a marked item whose instance EC2 shows live again is unmarked.
 */
export function decideGoneNodes<N extends GoneCandidate>(input: GoneNodesInput<N>): GoneNodeDecision<N>[] {
  const retentionMs = input.goneRetentionMs ?? GONE_RETENTION_MS;
  const out: GoneNodeDecision<N>[] = [];
  for (const node of input.nodes) {
    if (node.phase === 'GONE') {
      if (input.nowMs - node.updatedAtMs >= retentionMs) out.push({ node, action: 'remove' });
      continue;
    }
    const gone =
      !isInstanceLive(input.instanceStates.get(node.instanceId)) &&
      input.nowMs - node.createdAtMs >= input.minAgeMs &&
      !(node.phase === 'DRAINING' && input.nowMs - node.updatedAtMs < input.minAgeMs);
    if (!gone) {
      if (node.goneSeenAtMs !== undefined) out.push({ node, action: 'unmark' });
    } else if (node.goneSeenAtMs === undefined) {
      out.push({ node, action: 'mark' });
    } else if (input.nowMs - node.goneSeenAtMs >= input.minMarkAgeMs) {
      out.push({ node, action: 'remove' });
    }
  }
  return out;
}

export interface StrayLeasesInput {
  readonly nowMs: number;
  /** Partitions holding lease items (lease-partitions.ts). */
  readonly leasePartitions: readonly string[];
  readonly nodes: readonly NodeRecord[];
  readonly instanceStates: ReadonlyMap<string, string>;
  /** When a pass first saw each partition with no node item on a gone instance (lease-partitions.ts marks). */
  readonly strayMarks: ReadonlyMap<string, number>;
  /** The gap between the two looks. */
  readonly minMarkAgeMs: number;
}

export interface StrayPartition {
  readonly instanceArn: string;
  readonly instanceId: string;
  /** The GONE node item whose partition still holds leases; absent when there is no node item at all. */
  readonly goneNode?: NodeRecord;
  /**
   * remove: nothing can use these leases; mark: first seen with no node item on a gone instance (removed by a
   * later pass that still agrees); wait: marked, not long enough; report: the instance lives, so a pod may hold
   * one — an operator's call.
   */
  readonly action: 'remove' | 'mark' | 'wait' | 'report';
  readonly reason: string;
}

/**
 * Leases no node item stands for (DESIGN.md invariant 6): in the partition of a GONE node (terminate removed
 * them before writing GONE, so these came later: removed at once, the GONE item is the evidence), or in a
 * partition with no node item. Those are removed only after two looks at least `minMarkAgeMs` apart that both
 * find the instance gone, as for node items: one DescribeInstances snapshot may lag. On a live instance they
 * are only reported.
 */
export function decideStrayLeases(input: StrayLeasesInput): StrayPartition[] {
  const nodes = new Map(input.nodes.map((n) => [n.instanceArn, n]));
  const out: StrayPartition[] = [];
  for (const instanceArn of input.leasePartitions) {
    const node = nodes.get(instanceArn);
    if (node && node.phase !== 'GONE') continue;
    const instanceId = instanceIdOfArn(instanceArn);
    if (!instanceId) continue;
    if (node) {
      out.push({
        instanceArn,
        instanceId,
        goneNode: node,
        action: 'remove',
        reason: 'leases outlived their GONE node',
      });
      continue;
    }
    if (isInstanceLive(input.instanceStates.get(instanceId))) {
      out.push({ instanceArn, instanceId, action: 'report', reason: 'leases without a node item on a live instance' });
      continue;
    }
    const markedAtMs = input.strayMarks.get(instanceArn);
    const action =
      markedAtMs === undefined ? 'mark' : input.nowMs - markedAtMs >= input.minMarkAgeMs ? 'remove' : 'wait';
    out.push({ instanceArn, instanceId, action, reason: 'leases without a node item on a gone instance' });
  }
  return out;
}

/** Marks no longer backed by a stray partition on a gone instance: the next time it is seen, it starts over. */
export function staleStrayMarks(strays: readonly StrayPartition[], marks: ReadonlyMap<string, number>): string[] {
  const held = new Set(strays.filter((s) => s.action !== 'report').map((s) => s.instanceArn));
  return [...marks.keys()].filter((arn) => !held.has(arn));
}

export function instanceIdOfArn(instanceArn: string): string | undefined {
  try {
    return parseInstanceArn(instanceArn).instanceId;
  } catch {
    return undefined;
  }
}
