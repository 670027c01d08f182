import { randomUUID } from 'node:crypto';
import { isInstanceProvisionable } from '../domain/instance-states.js';
import type { Lease } from '../domain/lease.js';
import type { NodeRecord } from '../domain/node.js';
import type { Ec2Instance } from '../ec2/port.js';
import { VpcLeaseError } from '../errors.js';
import { expectedLeases } from '../lifecycle/pod-eni.js';
import { METRIC_DIMENSIONS, METRIC_NAMES, type MetricName } from '../metrics.js';
import { leaseCapFor } from '../planner/max-pods.js';
import type { PoolDeps } from './deps.js';
import { reportRejected, screenLeases } from './lease-trust.js';
import { advanceNewEnis, enisInProgress } from './new-eni.js';
import { releaseGroups, resumeReleasing } from './release.js';
import { planRelease } from './release-plan.js';
import { topUp } from './topup.js';
import {
  calculateExcessAddresses,
  calculateNeededAddresses,
  countPool,
  heldOf,
  type PoolCounts,
  type PoolTargets,
} from './watermarks.js';

export interface NodePoolReport {
  readonly instanceArn: string;
  /** Why nothing was done (not READY, instance not running…). */
  readonly skipped?: string;
  readonly counts?: PoolCounts;
  readonly needed: number;
  readonly excess: number;
  readonly adopted: number;
  readonly leased: readonly string[];
  readonly released: readonly string[];
  /** Left RELEASING for a later run (unknown Unassign outcome, failed delete). */
  readonly pendingRelease: readonly string[];
  readonly resumed: number;
  readonly shortfall: number;
  /** Subnets the top-up planned around: EC2 refused them for room within the hold (subnet-holds.ts). */
  readonly subnetsOnHold: readonly string[];
  readonly waitingForAttachment: boolean;
}

export function targetsOf(deps: Pick<PoolDeps, 'config'>, node: NodeRecord): PoolTargets {
  const { config } = deps;
  return {
    minLeases: config.minLeases,
    warmLowLeases: config.warmLowLeases,
    warmHighLeases: config.warmHighLeases,
    // The node's max-pods figure, the one kubelet admits pods by; the launch caps its leases the same way.
    maxLeases: leaseCapFor(node.maxPods, config.maxPods),
  };
}

/** The instance is stopping, terminated or not visible: nothing to add (terminate or the reconciler clean up). */
export class InstanceNotRunningError extends VpcLeaseError {
  constructor(
    readonly instanceId: string,
    readonly state: string | undefined,
  ) {
    super(`instance ${instanceId} is ${state ?? 'unknown to EC2'}`);
  }
}

/**
 * One pool pass over one node — the pool-manager's unit of work, from the stream (a claim or release on the
 * node) or the schedule (every node):
 *   read leases, then the node item (that order makes adoption safe, see adoptRecorded) → skip unless READY →
 *   finish interrupted releases → adopt recorded addresses that lack a lease → compute the watermarks →
 *   top up (assign, or a new ENI) or release excess through the handshake.
 * Concurrent passes over one node are safe: every write is conditional (marks, lease puts, node versions),
 * and a new ENI is added only when none is in progress.
 */
export async function manageNodePool(deps: PoolDeps, instanceArn: string): Promise<NodePoolReport> {
  const { store, config, clock, logger } = deps;
  const log = logger.child({ instanceArn });
  let leases = await store.listLeases(instanceArn);
  const node = await store.getNode(instanceArn);
  const base = {
    instanceArn,
    needed: 0,
    excess: 0,
    adopted: 0,
    leased: [],
    released: [],
    pendingRelease: [],
    resumed: 0,
    shortfall: 0,
    subnetsOnHold: [],
    waitingForAttachment: false,
  };
  if (!node) return { ...base, skipped: 'no node item' };
  if (node.phase !== 'READY') return { ...base, skipped: `node is ${node.phase}` };

  // Invariant 8: only leases that match the node item's records are acted on; the rest are reported once.
  const first = screenLeases(node, leases, clock.nowMs(), config.reuseWaitMs);
  reportRejected(deps, instanceArn, first.rejected);
  // An IPv6-only node's /80 was leased to max-pods at launch: there is no IPv4 pool to keep.
  if (node.ipFamily === 'ipv6') return { ...base, skipped: 'ipv6 node: its /80 holds every lease' };
  const resumed = await resumeReleasing(deps, node, [...first.trusted, ...first.unrecorded]);
  const adopted = await adoptRecorded(deps, node, leases);
  if (resumed.released.length + resumed.kept.length + adopted > 0) leases = await store.listLeases(instanceArn);
  leases = screenLeases(node, leases, clock.nowMs(), config.reuseWaitMs).trusted;

  let view = poolView(deps, node, leases);
  let leased: string[] = [];
  let shortfall = 0;
  let subnetsOnHold: readonly string[] = [];
  let waitingForAttachment = false;
  if (view.needed > 0 || enisInProgress(node).length > 0) {
    // One assigning pass per node: Assign has no idempotency token, so a stream pass and the sweep that both
    // saw the node low would both add addresses (released only after releaseDelayMs).
    const owner = randomUUID();
    if (!(await store.acquirePassMarker(instanceArn, owner, clock.nowMs(), passMarkerTtlMs(deps))))
      throw new AssignPassBusyError(instanceArn);
    try {
      // Read again under the marker: a pass that held it until now may have assigned what we counted as needed.
      const fresh = await store.getNode(instanceArn);
      if (fresh?.phase !== 'READY') return { ...base, skipped: `node is ${fresh?.phase ?? 'gone'}` };
      const freshLeases = await store.listLeases(instanceArn);
      view = poolView(deps, fresh, screenLeases(fresh, freshLeases, clock.nowMs(), config.reuseWaitMs).trusted);
      const assigned = await assign(deps, fresh, view);
      if ('skipped' in assigned)
        return { ...base, ...assigned, counts: view.counts, needed: view.needed, excess: view.excess };
      ({ leased, shortfall, subnetsOnHold, waitingForAttachment } = assigned);
    } finally {
      await store.releasePassMarker(instanceArn, owner);
    }
    if (shortfall > 0)
      log.warn('pool cannot reach its target: instance limits or subnets exhausted', { shortfall, subnetsOnHold });
  }
  const { counts, needed, excess, nowMs } = view;
  leases = [...view.leases];

  let released: string[] = [];
  let pendingRelease = [...resumed.pending];
  if (excess > 0) {
    const groups = planRelease(leases, excess, nowMs, config.releaseDelayMs);
    const result = await releaseGroups(deps, node, groups);
    released = result.released;
    pendingRelease = [...pendingRelease, ...result.pending];
  }

  const metric = (name: MetricName, value: number): void =>
    deps.metrics?.add(name, { [METRIC_DIMENSIONS.cluster]: config.clusterName }, value);
  metric(METRIC_NAMES.poolAddressesLeased, leased.length);
  metric(METRIC_NAMES.poolAddressesReleased, released.length + resumed.released.length);
  metric(METRIC_NAMES.poolAddressesAdopted, adopted);
  metric(METRIC_NAMES.poolShortfall, shortfall);
  if (leased.length + released.length + adopted + resumed.released.length > 0 || pendingRelease.length > 0)
    log.info('pool pass', {
      counts,
      needed,
      excess,
      leased: leased.length,
      released: released.length,
      resumed: resumed.released.length,
      adopted,
      pendingRelease,
    });
  return {
    instanceArn,
    counts,
    needed,
    excess,
    adopted,
    leased,
    released: [...resumed.released, ...released],
    pendingRelease,
    resumed: resumed.released.length,
    shortfall,
    subnetsOnHold,
    waitingForAttachment,
  };
}

interface PoolView {
  readonly leases: readonly Lease[];
  readonly nowMs: number;
  readonly counts: PoolCounts;
  readonly needed: number;
  readonly excess: number;
  readonly leaseRoom: number;
}

function poolView(deps: PoolDeps, node: NodeRecord, leases: readonly Lease[]): PoolView {
  const nowMs = deps.clock.nowMs();
  const counts = countPool(leases, nowMs, deps.config.releaseDelayMs);
  const targets = targetsOf(deps, node);
  return {
    leases,
    nowMs,
    counts,
    needed: calculateNeededAddresses(counts, targets),
    excess: calculateExcessAddresses(counts, targets),
    leaseRoom: targets.maxLeases - heldOf(counts),
  };
}

/** The marker outlives the pool-manager's 60 s timeout, so a crashed holder blocks its node at most this long. */
export const DEFAULT_PASS_MARKER_TTL_MS = 90_000;

function passMarkerTtlMs(deps: PoolDeps): number {
  return deps.passMarkerTtlMs ?? DEFAULT_PASS_MARKER_TTL_MS;
}

/** Another pool pass is assigning addresses on this node; the stream retries the record, the sweep next cycle. */
export class AssignPassBusyError extends VpcLeaseError {
  constructor(readonly instanceArn: string) {
    super(`failed to start an assignment pass on ${instanceArn}: another pass holds its marker`);
  }
}

/** Top up (assign, or a new ENI) and advance ENIs in progress, under the node's pass marker. */
async function assign(
  deps: PoolDeps,
  node: NodeRecord,
  view: PoolView,
): Promise<
  | { leased: string[]; shortfall: number; subnetsOnHold: readonly string[]; waitingForAttachment: boolean }
  | { skipped: string }
> {
  let instance: Ec2Instance | undefined;
  const readInstance = async (): Promise<Ec2Instance> => {
    if (!instance) {
      const seen = await deps.ec2.describeInstance(node.instanceId);
      if (!seen || !isInstanceProvisionable(seen.state))
        throw new InstanceNotRunningError(node.instanceId, seen?.state);
      instance = seen;
    }
    return instance;
  };
  const leased: string[] = [];
  let shortfall = 0;
  let subnetsOnHold: readonly string[] = [];
  let waitingForAttachment = false;
  try {
    let current: NodeRecord = node;
    if (view.needed > 0) {
      const result = await topUp(deps, node, readInstance, view.needed, view.leaseRoom);
      leased.push(...result.leased);
      shortfall = result.shortfall;
      subnetsOnHold = result.subnetsOnHold;
      if (result.plannedEni) current = (await deps.store.getNode(node.instanceArn)) ?? node;
    }
    if (current.phase === 'READY' && enisInProgress(current).length > 0) {
      const advanced = await advanceNewEnis(deps, current, await readInstance(), view.leaseRoom - leased.length);
      leased.push(...advanced.leased);
      waitingForAttachment = advanced.waiting;
    }
  } catch (err) {
    if (!(err instanceof InstanceNotRunningError)) throw err;
    return { skipped: err.message };
  }
  return { leased, shortfall, subnetsOnHold, waitingForAttachment };
}

/**
 * Addresses the node item records on a leasable ENI but no lease names: a top-up died between recording them
 * and leasing them. Safe because the leases were read BEFORE the node item: a release drops an address from
 * the node item before deleting its lease, so an address recorded at the later read whose lease was already
 * missing at the earlier read was never being released — it is assigned, recorded, and unleased.
 */
async function adoptRecorded(deps: PoolDeps, node: NodeRecord, leases: readonly Lease[]): Promise<number> {
  const have = new Set(leases.map((l) => l.ip));
  const missing = expectedLeases(node, leaseCapFor(node.maxPods, deps.config.maxPods)).filter((l) => !have.has(l.ip));
  if (missing.length === 0) return 0;
  deps.logger.warn('leasing recorded addresses that had no lease', {
    instanceArn: node.instanceArn,
    ips: missing.map((l) => l.ip),
  });
  await deps.store.putLeases(missing, deps.clock.nowMs());
  return missing.length;
}
