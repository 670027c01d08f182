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
export const GC_MARK_TAG = 'vpc-lease:gc-marked-at';

/** Instance states in which an instance still owns its ENIs. Anything else (terminated, unknown) is gone. */
const LIVE_INSTANCE_STATES = new Set(['pending', 'running', 'stopping', 'stopped', 'shutting-down']);

export function isInstanceLive(state: string | undefined): boolean {
  return state !== undefined && LIVE_INSTANCE_STATES.has(state);
}

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

export interface GoneNodesInput {
  readonly nowMs: number;
  /** A node item younger than this is kept even if EC2 does not know its instance yet (eventual consistency). */
  readonly minAgeMs: number;
  readonly nodes: readonly NodeRecord[];
  readonly instanceStates: ReadonlyMap<string, string>;
}

/**
 * Node partitions to remove: their instance is terminated or unknown to EC2, the item is not brand new, and
 * no terminate is in progress on it (the lifecycle Lambda finishes what it started: DRAINING → GONE).
 */
export function decideGoneNodes(input: GoneNodesInput): NodeRecord[] {
  return input.nodes.filter(
    (n) =>
      !isInstanceLive(input.instanceStates.get(n.instanceId)) &&
      input.nowMs - n.createdAtMs >= input.minAgeMs &&
      !(n.phase === 'DRAINING' && input.nowMs - n.updatedAtMs < input.minAgeMs),
  );
}
