import type { Lease } from '../domain/lease.js';
import type { NodeRecord } from '../domain/node.js';
import { expectedLeases } from '../lifecycle/pod-eni.js';
import type { Logger } from '../log.js';
import { leaseCapFor } from '../planner/max-pods.js';
import type { SweepCursorStore } from '../schedule/cursor.js';
import { DEFAULT_RESUME_RELEASING_AFTER_MS, type PoolDeps } from './deps.js';
import { screenLeases } from './lease-trust.js';
import { enisInProgress } from './new-eni.js';
import { targetsOf } from './pool-manager.js';
import { calculateExcessAddresses, calculateNeededAddresses, countPool } from './watermarks.js';

/**
 * Why a full pool pass is wanted on a node, judged from one look at its node item and leases (the daily
 * census's eventually consistent Scan), or undefined when the pass would find nothing to do. It names what only
 * a full pass catches on a node the hourly count finds in band: an interrupted release, a recorded address
 * without a lease, a lease the node item does not back, an ENI still being added.
 */
export function poolPassWanted(
  deps: Pick<PoolDeps, 'config' | 'resumeReleasingAfterMs'>,
  node: NodeRecord,
  leases: readonly Lease[],
  nowMs: number,
): string | undefined {
  if (node.phase !== 'READY') return undefined;
  const { config } = deps;
  const screened = screenLeases(node, leases, nowMs, config.reuseWaitMs);
  if (screened.rejected.length > 0) return 'untrusted leases';
  if (node.ipFamily === 'ipv6') return undefined;
  const staleBeforeMs = nowMs - (deps.resumeReleasingAfterMs ?? DEFAULT_RESUME_RELEASING_AFTER_MS);
  if (leases.some((l) => l.state === 'RELEASING' && (l.releasedAtMs ?? 0) <= staleBeforeMs))
    return 'interrupted release';
  const have = new Set(leases.map((l) => l.ip));
  if (expectedLeases(node, leaseCapFor(node.maxPods, config.maxPods)).some((l) => !have.has(l.ip)))
    return 'recorded address without a lease';
  if (enisInProgress(node).length > 0) return 'ENI in progress';
  const counts = countPool(screened.trusted, nowMs, config.releaseDelayMs);
  const targets = targetsOf(deps, node);
  if (calculateNeededAddresses(counts, targets) > 0 || calculateExcessAddresses(counts, targets) > 0)
    return 'outside its watermarks';
  return undefined;
}

/** The due list's name in the schedules partition: nodes the census found wanting a full pool pass. */
export const POOL_DUE = 'pool-due';
/** At ~90 bytes an ARN, well inside DynamoDB's 400 KB item; the rest wait for the next census. */
export const POOL_DUE_MAX_NODES = 2000;
const SAVE_ATTEMPTS = 3;

interface PoolDueState {
  readonly arns: readonly string[];
}

/**
 * Changes the due list with a conditional save, reading it again when another run saved in between; returns
 * the list as saved, or undefined when every attempt lost (the next run tries again).
 */
async function editDue(
  cursor: SweepCursorStore,
  logger: Logger,
  edit: (arns: readonly string[]) => readonly string[],
): Promise<readonly string[] | undefined> {
  for (let attempt = 0; attempt < SAVE_ATTEMPTS; attempt++) {
    const stored = await cursor.load<PoolDueState>(POOL_DUE);
    const before = stored?.state.arns ?? [];
    const after = edit(before);
    if (after.length === before.length && after.every((a, i) => a === before[i])) return after;
    if (await cursor.save<PoolDueState>(POOL_DUE, { arns: after }, stored?.version ?? 0)) return after;
  }
  logger.warn('the pool due list kept changing under this run; it leaves it', {});
  return undefined;
}

/** Adds nodes to the due list (the census, in the reconciler, which holds no right to assign or unassign). */
export async function addPoolDue(cursor: SweepCursorStore, logger: Logger, arns: readonly string[]): Promise<void> {
  if (arns.length === 0) return;
  await editDue(cursor, logger, (due) => {
    const all = [...new Set([...due, ...arns])];
    if (all.length > POOL_DUE_MAX_NODES)
      logger.warn('pool due list full; the rest wait for the next census', { left: all.length - POOL_DUE_MAX_NODES });
    return all.slice(0, POOL_DUE_MAX_NODES);
  });
}

/** The due list as it stands (the pool sweep, once per cycle). */
export async function loadPoolDue(cursor: SweepCursorStore): Promise<readonly string[]> {
  return (await cursor.load<PoolDueState>(POOL_DUE))?.state.arns ?? [];
}

/** Drops the nodes a sweep has passed in full. */
export async function dropPoolDue(cursor: SweepCursorStore, logger: Logger, passed: readonly string[]): Promise<void> {
  if (passed.length === 0) return;
  const done = new Set(passed);
  await editDue(cursor, logger, (due) => due.filter((arn) => !done.has(arn)));
}
