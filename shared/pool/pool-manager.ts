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
  readonly waitingForAttachment: boolean;
}

export function targetsOf(deps: PoolDeps, node: NodeRecord): PoolTargets {
  const { config } = deps;
  return {
    minLeases: config.minLeases,
    warmLowLeases: config.warmLowLeases,
    warmHighLeases: config.warmHighLeases,
    // The node's max-pods figure, the one kubelet admits pods by; the launch caps its leases the same way.
    maxLeases: leaseCapFor(node.maxPods, config.maxPods),
  };
}

const RUNNING_STATES = new Set(['pending', 'running']);

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
    waitingForAttachment: false,
  };
  if (!node) return { ...base, skipped: 'no node item' };
  if (node.phase !== 'READY') return { ...base, skipped: `node is ${node.phase}` };

  // Invariant 8: only leases that match the node item's records are acted on; the rest are reported once.
  const first = screenLeases(node, leases, clock.nowMs(), config.reuseWaitMs);
  reportRejected(deps, instanceArn, first.rejected);
  const resumed = await resumeReleasing(deps, node, [...first.trusted, ...first.unrecorded]);
  const adopted = await adoptRecorded(deps, node, leases);
  if (resumed.released.length + resumed.kept.length + adopted > 0) leases = await store.listLeases(instanceArn);
  leases = screenLeases(node, leases, clock.nowMs(), config.reuseWaitMs).trusted;

  const nowMs = clock.nowMs();
  const counts = countPool(leases, nowMs, config.releaseDelayMs);
  const targets = targetsOf(deps, node);
  const needed = calculateNeededAddresses(counts, targets);
  const excess = calculateExcessAddresses(counts, targets);
  const leaseRoom = targets.maxLeases - heldOf(counts);

  let leased: string[] = [];
  let shortfall = 0;
  let waitingForAttachment = false;
  if (needed > 0 || enisInProgress(node).length > 0) {
    let instance: Ec2Instance | undefined;
    const readInstance = async (): Promise<Ec2Instance> => {
      if (!instance) {
        const seen = await deps.ec2.describeInstance(node.instanceId);
        if (!seen || !RUNNING_STATES.has(seen.state)) throw new InstanceNotRunningError(node.instanceId, seen?.state);
        instance = seen;
      }
      return instance;
    };
    try {
      let current: NodeRecord = node;
      if (needed > 0) {
        const result = await topUp(deps, node, readInstance, needed, leaseRoom);
        leased = [...result.leased];
        shortfall = result.shortfall;
        if (result.plannedEni) current = (await store.getNode(instanceArn)) ?? node;
      }
      if (current.phase === 'READY' && enisInProgress(current).length > 0) {
        const advanced = await advanceNewEnis(deps, current, await readInstance(), leaseRoom - leased.length);
        leased.push(...advanced.leased);
        waitingForAttachment = advanced.waiting;
      }
    } catch (err) {
      if (!(err instanceof InstanceNotRunningError)) throw err;
      return { ...base, skipped: err.message, counts, needed, excess };
    }
    if (shortfall > 0) log.warn('pool cannot reach its target: instance limits or subnets exhausted', { shortfall });
  }

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
    waitingForAttachment,
  };
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
