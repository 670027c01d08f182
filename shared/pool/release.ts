import type { Lease } from '../domain/lease.js';
import type { NodeRecord } from '../domain/node.js';
import { isEc2Error } from '../ec2/errors.js';
import type { Ec2Eni } from '../ec2/port.js';
import { errorMessage, LeaseConflictError, LeaseNotFoundError, VpcLeaseError } from '../errors.js';
import { DEFAULT_RESUME_RELEASING_AFTER_MS, type PoolDeps } from './deps.js';
import { ec2Refutes, recordFor, reportRejected } from './lease-trust.js';
import { editNodeEnis, withoutAddresses } from './node-record.js';
import type { ReleaseGroup } from './release-plan.js';

/** A release step failed in a way that leaves RELEASING leases for the resume path to finish. */
export class ReleaseIncompleteError extends VpcLeaseError {}

export interface ReleaseResult {
  /** Addresses unassigned in EC2 and whose leases are gone. */
  readonly released: string[];
  /** Addresses whose mark lost (claimed or changed meanwhile) or that were rolled back to FREE. */
  readonly kept: string[];
  /** Addresses left RELEASING (outcome unknown, or the delete failed): the resume path finishes them. */
  readonly pending: string[];
}

/** Codes EC2 answers before touching anything: the request was refused as a whole. */
const REFUSED_BEFORE_ACTING = new Set(['UnauthorizedOperation', 'AuthFailure', 'RequestLimitExceeded']);

/** How many HTTP attempts the SDK made (its retries hide every answer but the last). */
function attemptsOf(err: { cause?: unknown }): number {
  return (err.cause as { $metadata?: { attempts?: number } } | undefined)?.$metadata?.attempts ?? 1;
}

const emptyResult = (): ReleaseResult => ({ released: [], kept: [], pending: [] });

function merge(into: ReleaseResult, from: ReleaseResult): void {
  into.released.push(...from.released);
  into.kept.push(...from.kept);
  into.pending.push(...from.pending);
}

/**
 * The release handshake for a planned group (DESIGN.md invariant 6):
 *
 *   markReleasing (conditional: FREE/COOLDOWN, claimable since before now − releaseDelay)
 *     → UnassignPrivateIpAddresses
 *     → remove the addresses from the node item (so no resumed launch re-leases them)
 *     → deleteReleasing (conditional: still RELEASING)
 *
 * Before Unassign nothing is lost: a lease that could not be marked is skipped, and a failed Unassign that
 * surely did nothing (throttled, refused) rolls the marks back to FREE. When the Unassign's outcome is unknown
 * (5xx, lost answer) the leases stay RELEASING — unclaimable, so no pod gets an address that may be gone — and
 * `resumeReleasing` finishes them once EC2's view has settled.
 */
export async function releaseGroups(
  deps: PoolDeps,
  node: NodeRecord,
  groups: readonly ReleaseGroup[],
): Promise<ReleaseResult> {
  const result = emptyResult();
  for (const group of groups) merge(result, await releaseGroup(deps, node, group));
  return result;
}

async function releaseGroup(deps: PoolDeps, node: NodeRecord, group: ReleaseGroup): Promise<ReleaseResult> {
  const { store, config, clock, logger } = deps;
  const { instanceArn } = node;
  const result = emptyResult();
  // Invariant 8: EC2 must confirm the ENI is this instance's and holds the addresses before anything is marked.
  const target = group.prefix !== undefined ? { prefixes: [group.prefix] } : { ips: group.ips };
  const refuted = ec2Refutes(await describeEni(deps, group.eniId), node.instanceId, config.clusterName, target);
  if (refuted) {
    reportRejected(deps, instanceArn, [refuted]);
    result.kept.push(...group.ips);
    return result;
  }
  const nowMs = clock.nowMs();
  const marked: string[] = [];
  for (const ip of group.ips) {
    try {
      await store.markReleasing(instanceArn, ip, nowMs, nowMs - config.releaseDelayMs);
      marked.push(ip);
    } catch (err) {
      if (err instanceof LeaseConflictError || err instanceof LeaseNotFoundError) {
        result.kept.push(ip); // claimed (or used and released) since the plan: it stays
        continue;
      }
      // The store failed: undo what this group marked, so nothing waits on the resume path needlessly.
      await revert(deps, instanceArn, marked, result);
      throw err;
    }
  }
  // A /28 goes whole or not at all: one lease that could not be marked keeps the prefix.
  if (group.prefix !== undefined && marked.length < group.ips.length) {
    await revert(deps, instanceArn, marked, result);
    return result;
  }
  if (marked.length === 0) return result;

  try {
    await deps.ec2.unassignPrivateIpAddresses(
      group.eniId,
      group.prefix !== undefined ? { prefixes: [group.prefix] } : { ips: marked },
    );
  } catch (err) {
    if (
      isEc2Error(err) &&
      (err.kind === 'throttling' || REFUSED_BEFORE_ACTING.has(err.code)) &&
      attemptsOf(err) === 1
    ) {
      // The only attempt was refused before doing anything: the addresses are still assigned, roll back.
      // After several attempts the last error says nothing of the earlier ones (a 500 that took effect, then
      // a throttle): that case is "unknown" below.
      logger.warn('unassign refused; release rolled back', { instanceArn, eniId: group.eniId, err });
      await revert(deps, instanceArn, marked, result);
      return result;
    }
    // Anything else may have half-happened (a lost answer; an SDK retry that found the address already gone).
    // Asking EC2 right now could read a stale answer (Describe is eventually consistent) and roll back an
    // address that is gone — so the leases stay RELEASING, unclaimable, and the resume path decides later on a
    // settled view.
    logger.warn('unassign outcome unknown; leases left RELEASING for the resume path', {
      instanceArn,
      eniId: group.eniId,
      err,
    });
    result.pending.push(...marked);
    return result;
  }
  merge(result, await finishReleased(deps, instanceArn, group.eniId, marked, group.prefix));
  return result;
}

/**
 * The addresses are no longer in EC2: drop them from the node item, then delete their RELEASING leases. A
 * failure leaves them RELEASING (never claimable), for the resume path.
 */
async function finishReleased(
  deps: PoolDeps,
  instanceArn: string,
  eniId: string,
  ips: readonly string[],
  prefix: string | undefined,
): Promise<ReleaseResult> {
  const result = emptyResult();
  if (ips.length === 0) return result;
  try {
    await editNodeEnis(deps.store, instanceArn, deps.clock.nowMs(), (enis) =>
      enis.map((e) => (e.eniId === eniId ? withoutAddresses(e, ips, prefix !== undefined ? [prefix] : []) : e)),
    );
  } catch (err) {
    deps.logger.warn('failed to drop released addresses from the node item; resume path retries', {
      instanceArn,
      eniId,
      ips,
      err,
    });
    result.pending.push(...ips);
    return result;
  }
  for (const ip of ips) {
    try {
      await deps.store.deleteReleasing(instanceArn, ip);
      result.released.push(ip);
    } catch (err) {
      deps.logger.warn('failed to delete a released lease; resume path retries', { instanceArn, ip, err });
      result.pending.push(ip);
    }
  }
  return result;
}

async function revert(
  deps: PoolDeps,
  instanceArn: string,
  ips: readonly string[],
  result: ReleaseResult,
): Promise<void> {
  const nowMs = deps.clock.nowMs();
  for (const ip of ips) {
    try {
      await deps.store.revertReleasing(instanceArn, ip, nowMs);
      result.kept.push(ip);
    } catch (err) {
      // Left RELEASING: unclaimable but still assigned; the resume path unassigns it and completes the release.
      deps.logger.warn('failed to roll back a RELEASING lease; resume path finishes it', { instanceArn, ip, err });
      result.pending.push(ip);
    }
  }
}

/**
 * Finishes handshakes interrupted in an earlier invocation: RELEASING leases older than the resume delay.
 * EC2 decides the way forward, never a guess:
 * - the address (or its /28) is gone from the ENI (or the ENI is gone): drop it from the node item, delete;
 * - a single address still assigned: Unassign it, then the same;
 * - a /28 still assigned whose leases are not all RELEASING (the crash came between two marks): nothing was
 *   unassigned, so the RELEASING ones are rolled back to FREE — safe, since the prefix is still there.
 */
export async function resumeReleasing(
  deps: PoolDeps,
  node: NodeRecord,
  leases: readonly Lease[],
): Promise<ReleaseResult> {
  const { instanceArn } = node;
  const result = emptyResult();
  const nowMs = deps.clock.nowMs();
  const staleBeforeMs = nowMs - (deps.resumeReleasingAfterMs ?? DEFAULT_RESUME_RELEASING_AFTER_MS);
  const stale = leases.filter((l) => l.state === 'RELEASING' && (l.releasedAtMs ?? 0) <= staleBeforeMs);
  if (stale.length === 0) return result;
  const eniIds = [...new Set(stale.map((l) => l.eniId))];
  const enis = new Map<string, Ec2Eni>();
  for (const eniId of eniIds) {
    const eni = await describeEni(deps, eniId);
    if (eni) enis.set(eniId, eni);
  }
  deps.logger.info('resuming interrupted releases', { instanceArn, ips: stale.map((l) => l.ip) });

  const reject = (lease: Lease, what: string): void => {
    reportRejected(deps, instanceArn, [
      {
        ip: lease.ip,
        reason: 'not-recorded',
        detail: `${what} is on ${lease.eniId} in EC2 but not recorded for ${node.instanceId}`,
      },
    ]);
    result.kept.push(lease.ip);
  };
  const byGroup = new Map<string, Lease[]>();
  for (const lease of stale) {
    const key = `${lease.eniId}|${lease.prefix ?? ''}`;
    byGroup.set(key, [...(byGroup.get(key) ?? []), lease]);
  }
  for (const members of byGroup.values()) {
    const first = members[0]!;
    const eni = enis.get(first.eniId);
    const ips = members.map((l) => l.ip);
    // A gone ENI took its addresses along. One that is there must be this instance's and tagged for the
    // cluster, and what is unassigned must be recorded on the node item (invariant 8) — else nothing is done,
    // not even the delete: the lease stays RELEASING (unclaimable) and is counted every pass until someone looks.
    const refuted = eni ? ec2Refutes(eni, node.instanceId, deps.config.clusterName, {}) : undefined;
    if (refuted) {
      reportRejected(deps, instanceArn, [{ ...refuted, ip: first.ip }]);
      result.kept.push(...ips);
      continue;
    }
    const recorded = (l: Lease): boolean => recordFor(node, l) !== undefined;
    if (first.prefix !== undefined) {
      const prefix = first.prefix;
      if (eni?.prefixes.includes(prefix)) {
        const all = leases.filter((l) => l.eniId === first.eniId && l.prefix === prefix);
        if (all.some((l) => l.state !== 'RELEASING')) {
          await revert(deps, instanceArn, ips, result);
          continue;
        }
        if (!members.every(recorded)) {
          reject(first, prefix);
          continue;
        }
        await unassignOrThrow(deps, first.eniId, { prefixes: [prefix] });
      }
      merge(result, await finishReleased(deps, instanceArn, first.eniId, ips, prefix));
    } else {
      const assigned = members.filter((l) => eni?.secondaryIps.includes(l.ip));
      const refused = assigned.filter((l) => !recorded(l));
      for (const l of refused) reject(l, l.ip);
      const refusedIps = new Set(refused.map((l) => l.ip));
      const toUnassign = assigned.filter((l) => !refusedIps.has(l.ip)).map((l) => l.ip);
      if (toUnassign.length > 0) await unassignOrThrow(deps, first.eniId, { ips: toUnassign });
      const done = ips.filter((ip) => !refusedIps.has(ip));
      merge(result, await finishReleased(deps, instanceArn, first.eniId, done, undefined));
    }
  }
  return result;
}

/** The ENI as EC2 sees it now; undefined when EC2 answers NotFound (a deleted ENI took its addresses along). */
async function describeEni(deps: PoolDeps, eniId: string): Promise<Ec2Eni | undefined> {
  try {
    const [eni] = await deps.ec2.describeNetworkInterfaces({ eniIds: [eniId] });
    return eni;
  } catch (err) {
    if (!(isEc2Error(err) && /NotFound/.test(err.code))) throw err;
    return undefined;
  }
}

async function unassignOrThrow(
  deps: PoolDeps,
  eniId: string,
  request: { ips?: readonly string[]; prefixes?: readonly string[] },
): Promise<void> {
  try {
    await deps.ec2.unassignPrivateIpAddresses(eniId, request);
  } catch (err) {
    throw new ReleaseIncompleteError(
      `failed to unassign ${JSON.stringify(request)} from ${eniId}: ${errorMessage(err)}`,
      {
        cause: err,
      },
    );
  }
}
