import type { EniRecord, NodeRecord } from '../domain/node.js';
import { isEc2Error } from '../ec2/errors.js';
import type { Ec2Instance } from '../ec2/port.js';
import { eniClientToken, POOL_OWNER } from '../ec2/tags.js';
import { eniLeases } from '../lifecycle/pod-eni.js';
import { type EniWriter, IN_PROGRESS_STEPS, isStale, type StepFailure } from '../lifecycle/pod-eni-outcome.js';
import { ATTACH_POLL_MS, advancePodEnis } from '../lifecycle/pod-eni-steps.js';
import type { PlannedEni } from '../planner/launch-plan.js';
import { mergeRefusals } from '../planner/subnet-choice.js';
import { DEFAULT_ATTACH_WAIT_MS, type PoolDeps, sleepOf } from './deps.js';
import { editNode, editNodeEnis } from './node-record.js';

/** Re-exported for callers that import them from the pool; they live in shared/ec2 and shared/lifecycle. */
export { eniLeases as leasesOf, POOL_OWNER };

/**
 * The ClientToken of a pool-planned ENI: the launch's, salted with the planning time (see eniClientToken).
 * Retries of one plan reuse the record, hence the same token.
 */
export function poolEniClientToken(
  instanceId: string,
  planned: Pick<PlannedEni, 'deviceIndex' | 'subnetId' | 'ipCount' | 'prefixCount'> & {
    readonly ipv6PrefixCount?: number;
  },
  plannedAtMs: number,
): string {
  return eniClientToken(instanceId, planned.deviceIndex, planned, plannedAtMs);
}

export function enisInProgress(node: NodeRecord): EniRecord[] {
  return node.enis.filter((e) => IN_PROGRESS_STEPS.has(e.step));
}

/**
 * Records a new ENI as PLANNED on the node item — one at a time per node, so two pool runs racing cannot
 * both add one (the conditional node write serializes them; the loser sees the winner's record).
 */
export async function planNewEni(
  deps: PoolDeps,
  node: NodeRecord,
  planned: PlannedEni,
): Promise<NodeRecord | undefined> {
  const nowMs = deps.clock.nowMs();
  return editNodeEnis(deps.store, node.instanceArn, nowMs, (enis, current) => {
    if (current.phase !== 'READY') return undefined;
    if (enis.some((e) => IN_PROGRESS_STEPS.has(e.step) || e.deviceIndex === planned.deviceIndex)) return undefined;
    // A dual node's pod ENIs all carry a /80, so every IPv4 lease on this one gets its IPv6 partner.
    const ipv6PrefixCount = current.ipFamily === 'dual' || current.ipFamily === 'ipv6' ? 1 : 0;
    const record: EniRecord = {
      deviceIndex: planned.deviceIndex,
      networkCardIndex: planned.networkCardIndex,
      subnetId: planned.subnetId,
      clientToken: poolEniClientToken(current.instanceId, { ...planned, ipv6PrefixCount }, nowMs),
      step: 'PLANNED',
      addresses: [],
      prefixes: [],
      plannedIpCount: planned.ipCount,
      plannedPrefixCount: planned.prefixCount,
      ...(ipv6PrefixCount > 0 ? { plannedIpv6PrefixCount: ipv6PrefixCount } : {}),
      plannedAtMs: nowMs,
    };
    return [...enis, record];
  });
}

export interface AdvanceResult {
  /** Addresses leased on ENIs that reached LEASED in this call. */
  readonly leased: string[];
  /** An attachment is still in progress: the next run continues. */
  readonly waiting: boolean;
}

/**
 * Takes the in-progress ENIs of a READY node through the shared pod-ENI steps (lifecycle/pod-eni-steps.ts),
 * waiting inline for the attachment up to `attachWaitMs` (pods wait on these addresses; past it the next run
 * continues). An ENI EC2 refuses for good (attachment limit, no subnet with room) is deleted if it exists and
 * its record dropped; the next top-up replans. Retryable EC2 errors fail the pass (the next run retries).
 */
export async function advanceNewEnis(
  deps: PoolDeps,
  node: NodeRecord,
  instance: Ec2Instance,
  leaseRoom: number,
): Promise<AdvanceResult> {
  const outcome = await advancePodEnis(deps, node, instance, {
    owner: POOL_OWNER,
    leaseRoom,
    attachPolls: Math.max(1, Math.ceil((deps.attachWaitMs ?? DEFAULT_ATTACH_WAIT_MS) / ATTACH_POLL_MS)),
    sleep: sleepOf(deps),
    write: readyNodeWriter(deps),
  });
  const leased = [...outcome.leased];
  for (const eni of outcome.dropped)
    deps.logger.warn('EC2 refused a new pod ENI (no subnet with room); dropping it', {
      instanceArn: node.instanceArn,
      deviceIndex: eni.deviceIndex,
    });
  switch (outcome.kind) {
    case 'done':
    case 'gone':
      return { leased, waiting: false };
    case 'refused':
      for (const failure of outcome.failures) await dropRefused(deps, node, failure);
      return { leased, waiting: false };
    case 'wait': {
      if (outcome.failures.length === 0) return { leased, waiting: true };
      const collected = outcome.failures.filter(
        (f) => isEc2Error(f.err, 'not-found-yet') && collectedMeanwhile(deps, f.eni),
      );
      if (collected.length < outcome.failures.length) throw outcome.failures.find((f) => !collected.includes(f))!.err;
      for (const { eni } of collected) {
        // Stuck unattached past the reconciler's minimum age, it was collected: forget it, replan later.
        deps.logger.warn('new pod ENI is gone (collected as a leak); dropping it', {
          instanceArn: node.instanceArn,
          eni,
        });
        await dropRecord(deps, node.instanceArn, eni);
      }
      return { leased, waiting: false };
    }
  }
}

async function dropRefused(deps: PoolDeps, node: NodeRecord, { eni, err }: StepFailure): Promise<void> {
  deps.logger.warn('EC2 refused a new pod ENI; dropping it', { instanceArn: node.instanceArn, eni, err });
  if (eni.eniId && (eni.step === 'CREATED' || eni.step === 'PLANNED')) {
    try {
      await deps.ec2.deleteNetworkInterface(eni.eniId);
    } catch (deleteErr) {
      // The reconciler collects it (tagged, unattached) after its minimum age.
      deps.logger.warn('failed to delete a refused pod ENI', { eniId: eni.eniId, deleteErr });
    }
  }
  await dropRecord(deps, node.instanceArn, eni);
}

async function dropRecord(deps: PoolDeps, instanceArn: string, eni: EniRecord): Promise<void> {
  await editNodeEnis(deps.store, instanceArn, deps.clock.nowMs(), (enis) =>
    enis.filter((e) => e.deviceIndex !== eni.deviceIndex || !IN_PROGRESS_STEPS.has(e.step)),
  );
}

/** An ENI EC2 no longer knows, planned longer ago than the reconciler's minimum age: deleted, not "not yet". */
function collectedMeanwhile(deps: PoolDeps, eni: EniRecord): boolean {
  return (
    eni.eniId !== undefined &&
    eni.plannedAtMs !== undefined &&
    deps.clock.nowMs() - eni.plannedAtMs >= deps.config.eniMinAgeForGcMs
  );
}

/**
 * The pool's writer: re-reads and re-applies on a version conflict (other pool passes and Assign records write
 * the same item), skips an ENI a concurrent pass already recorded at the same or a later step (the ClientToken
 * and the attachment read-back make their EC2 calls agree; this keeps the slower one from writing an older
 * step over the faster one's), carries the subnet refusals the steps noted on `node`, and stops once the
 * node is no longer READY (a terminate won).
 */
function readyNodeWriter(deps: PoolDeps): EniWriter {
  return async (node, changed) => {
    let left = false;
    const written = await editNode(deps.store, node.instanceArn, deps.clock.nowMs(), (current) => {
      if (current.phase !== 'READY') {
        left = true;
        return undefined;
      }
      let any = false;
      const enis = current.enis.flatMap((stored) => {
        if (!changed.has(stored.deviceIndex)) return [stored];
        const eni = changed.get(stored.deviceIndex);
        // A record replanned into another subnet carries a new ClientToken: not stale, though still PLANNED.
        if (eni && isStale(stored, eni) && eni.clientToken === stored.clientToken) return [stored];
        any = true;
        return eni ? [eni] : [];
      });
      const refusals = mergeRefusals(current.subnetRefusals, node.subnetRefusals ?? []);
      const noted = JSON.stringify(refusals) !== JSON.stringify(current.subnetRefusals ?? []);
      if (!any && !noted) return undefined;
      return { ...current, enis, ...(refusals.length > 0 ? { subnetRefusals: refusals } : {}) };
    });
    return left ? undefined : written;
  };
}
