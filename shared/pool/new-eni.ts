import { createHash } from 'node:crypto';
import type { NewLease } from '../domain/lease.js';
import type { EniRecord, NodeRecord } from '../domain/node.js';
import { isEc2Error } from '../ec2/errors.js';
import type { Ec2Instance } from '../ec2/port.js';
import { podEniTags } from '../ec2/tags.js';
import { addressesOf, subnetGateway } from '../ipv4.js';
import { podSecurityGroups } from '../lifecycle/subnets.js';
import type { PlannedEni } from '../planner/launch-plan.js';
import { DEFAULT_ATTACH_WAIT_MS, type PoolDeps, sleepOf } from './deps.js';
import { editNodeEnis } from './node-record.js';

/** Attachments take seconds in EC2; polling faster only spends DescribeNetworkInterfaces tokens. */
const ATTACH_POLL_MS = 250;

/** The owner tag of ENIs the pool-manager adds to READY nodes. */
export const POOL_OWNER = 'pool-manager';

/**
 * A pod ENI added to a READY node, in the lifecycle's record format (PodEniRecord: the planned counts travel
 * with the record so a retried create sends the very same request under the same ClientToken), plus the time
 * it was planned — its created-at tag, which the reconciler's minimum age counts from.
 */
export interface PoolEniRecord extends EniRecord {
  readonly plannedIpCount: number;
  readonly plannedPrefixCount: number;
  readonly plannedAtMs?: number;
}

const IN_PROGRESS = new Set(['PLANNED', 'CREATED', 'ATTACHING', 'ATTACHED']);

/**
 * The ClientToken of a pool-planned ENI: like the launch's (instance, device index, request) but also salted
 * with the planning time. A device index is reused after its ENI is gone (refused, or collected by the
 * reconciler), and EC2 answers a replayed token with the original — deleted — ENI; a new plan must get a new
 * ENI. Retries of one plan reuse the record, hence the same token. ≤ 64 ASCII characters, as EC2 requires.
 */
export function poolEniClientToken(
  instanceId: string,
  planned: Pick<PlannedEni, 'deviceIndex' | 'subnetId' | 'ipCount' | 'prefixCount'>,
  plannedAtMs: number,
): string {
  const digest = createHash('sha256')
    .update(
      `${instanceId}/${planned.deviceIndex}/${planned.subnetId}/${planned.ipCount}/${planned.prefixCount}/${plannedAtMs}`,
    )
    .digest('hex')
    .slice(0, 32);
  return `vlp-${instanceId}-${planned.deviceIndex}-${digest}`.slice(0, 64);
}

export function enisInProgress(node: NodeRecord): PoolEniRecord[] {
  return node.enis.filter((e) => IN_PROGRESS.has(e.step)).map(asPoolEni);
}

function asPoolEni(e: EniRecord): PoolEniRecord {
  const p = e as Partial<PoolEniRecord> & EniRecord;
  return { ...e, plannedIpCount: p.plannedIpCount ?? 0, plannedPrefixCount: p.plannedPrefixCount ?? 0 };
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
    if (enis.some((e) => IN_PROGRESS.has(e.step) || e.deviceIndex === planned.deviceIndex)) return undefined;
    const record: PoolEniRecord = {
      deviceIndex: planned.deviceIndex,
      networkCardIndex: planned.networkCardIndex,
      subnetId: planned.subnetId,
      clientToken: poolEniClientToken(current.instanceId, planned, nowMs),
      step: 'PLANNED',
      addresses: [],
      prefixes: [],
      plannedIpCount: planned.ipCount,
      plannedPrefixCount: planned.prefixCount,
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
 * Moves the in-progress ENIs of a READY node on: PLANNED → create (ClientToken) → CREATED → attach →
 * ATTACHING → DeleteOnTermination, wait for `attached` (bounded; else the next run continues) → ATTACHED →
 * leases → LEASED, writing the node item after each step, as the launch does. An ENI EC2 refuses for good
 * (subnet full, attachment limit) is deleted if it exists and its record dropped; the next top-up replans.
 *
 * (The lifecycle's LaunchSteps does the same for PROVISIONING nodes but is not exported and completes or
 * abandons the launch on the way; see the report — it should move into one shared phase-agnostic executor.)
 */
export async function advanceNewEnis(
  deps: PoolDeps,
  node: NodeRecord,
  instance: Ec2Instance,
  leaseRoom: number,
): Promise<AdvanceResult> {
  const leased: string[] = [];
  let current: NodeRecord | undefined = node;
  for (const start of enisInProgress(node)) {
    let eni = start;
    try {
      while (current && eni.step !== 'LEASED') {
        const next = await step(deps, current, instance, eni, leaseRoom - leased.length, leased);
        if (!next) return { leased, waiting: true };
        eni = next;
        current = await save(deps, current.instanceArn, eni);
      }
    } catch (err) {
      if (isEc2Error(err, 'not-found-yet') && collectedMeanwhile(deps, eni)) {
        // Stuck unattached past the reconciler's minimum age, it was collected: forget it, replan later.
        deps.logger.warn('new pod ENI is gone (collected as a leak); dropping it', {
          instanceArn: node.instanceArn,
          eni,
          err,
        });
        await editNodeEnis(deps.store, node.instanceArn, deps.clock.nowMs(), (enis) =>
          enis.filter((e) => e.deviceIndex !== eni.deviceIndex || !IN_PROGRESS.has(e.step)),
        );
        continue;
      }
      if (!isEc2Error(err) || err.retryable) throw err;
      deps.logger.warn('EC2 refused a new pod ENI; dropping it', { instanceArn: node.instanceArn, eni, err });
      if (eni.eniId && (eni.step === 'CREATED' || eni.step === 'PLANNED')) {
        try {
          await deps.ec2.deleteNetworkInterface(eni.eniId);
        } catch (deleteErr) {
          // The reconciler collects it (tagged, unattached) after its minimum age.
          deps.logger.warn('failed to delete a refused pod ENI', { eniId: eni.eniId, deleteErr });
        }
      }
      await editNodeEnis(deps.store, node.instanceArn, deps.clock.nowMs(), (enis) =>
        enis.filter((e) => e.deviceIndex !== eni.deviceIndex || !IN_PROGRESS.has(e.step)),
      );
    }
  }
  return { leased, waiting: false };
}

const STEP_ORDER = ['PLANNED', 'CREATED', 'ATTACHING', 'ATTACHED', 'LEASED'];

/**
 * Records the ENI's new step — unless a concurrent pass already recorded the same or a later one (two passes
 * may advance one ENI together: the ClientToken and the attachment read-back make their EC2 calls agree, and
 * this keeps the slower one from writing an older step over the faster one's).
 */
/** An ENI EC2 no longer knows, planned longer ago than the reconciler's minimum age: deleted, not "not yet". */
function collectedMeanwhile(deps: PoolDeps, eni: PoolEniRecord): boolean {
  return (
    eni.eniId !== undefined &&
    eni.plannedAtMs !== undefined &&
    deps.clock.nowMs() - eni.plannedAtMs >= deps.config.eniMinAgeForGcMs
  );
}

async function save(deps: PoolDeps, instanceArn: string, eni: PoolEniRecord): Promise<NodeRecord | undefined> {
  return editNodeEnis(deps.store, instanceArn, deps.clock.nowMs(), (enis) => {
    const stored = enis.find((e) => e.deviceIndex === eni.deviceIndex);
    if (!stored) return undefined; // dropped meanwhile (refused by EC2 in another pass)
    if (stored.eniId === eni.eniId && STEP_ORDER.indexOf(stored.step) >= STEP_ORDER.indexOf(eni.step)) return undefined;
    return enis.map((e) => (e.deviceIndex === eni.deviceIndex ? eni : e));
  });
}

/** One step; undefined when the attachment is still in progress after the wait budget. */
async function step(
  deps: PoolDeps,
  node: NodeRecord,
  instance: Ec2Instance,
  eni: PoolEniRecord,
  leaseRoom: number,
  leased: string[],
): Promise<PoolEniRecord | undefined> {
  const { ec2, config } = deps;
  switch (eni.step) {
    case 'PLANNED': {
      const created = await ec2.createNetworkInterface({
        subnetId: eni.subnetId,
        securityGroupIds: podSecurityGroups(config, instance),
        ipCount: eni.plannedIpCount,
        prefixCount: eni.plannedPrefixCount,
        // The planned time, not the clock: a retried create must send identical parameters.
        tags: podEniTags(config.clusterName, instance.instanceId, eni.deviceIndex, eni.plannedAtMs ?? 0, POOL_OWNER),
        clientToken: eni.clientToken,
        description: `vpc-lease pod ENI of ${instance.instanceId}`,
      });
      const [subnet] = await ec2.describeSubnets({ subnetIds: [created.subnetId] });
      return {
        ...eni,
        step: 'CREATED',
        eniId: created.eniId,
        mac: created.mac,
        ...(subnet ? { subnetCidr: subnet.cidr } : {}),
        addresses: [...created.secondaryIps],
        prefixes: [...created.prefixes],
      };
    }
    case 'CREATED': {
      try {
        const attachmentId = await ec2.attachNetworkInterface({
          eniId: eni.eniId!,
          instanceId: instance.instanceId,
          deviceIndex: eni.deviceIndex,
          networkCardIndex: eni.networkCardIndex,
        });
        return { ...eni, step: 'ATTACHING', attachmentId };
      } catch (err) {
        if (isEc2Error(err, 'throttling', 'unavailable')) throw err;
        // An attach that landed before a crash answers "in use" now: read the attachment back.
        const [seen] = await ec2.describeNetworkInterfaces({ eniIds: [eni.eniId!] });
        const att = seen?.attachment;
        if (att?.instanceId === instance.instanceId && att.deviceIndex === eni.deviceIndex)
          return { ...eni, step: 'ATTACHING', attachmentId: att.attachmentId };
        throw err;
      }
    }
    case 'ATTACHING': {
      if (eni.deleteOnTermination !== true) {
        await ec2.setDeleteOnTermination(eni.eniId!, eni.attachmentId!, true);
        eni = { ...eni, deleteOnTermination: true };
      }
      // Bounded by polls, not by the injected clock: the clock stamps leases (tests hold it still), while
      // this is a real wait on EC2.
      const polls = Math.max(1, Math.ceil((deps.attachWaitMs ?? DEFAULT_ATTACH_WAIT_MS) / ATTACH_POLL_MS));
      for (let poll = 1; ; poll += 1) {
        const [seen] = await ec2.describeNetworkInterfaces({ eniIds: [eni.eniId!] });
        if (seen?.attachment?.status === 'attached') return { ...eni, step: 'ATTACHED' };
        if (poll >= polls) return undefined;
        await sleepOf(deps)(ATTACH_POLL_MS);
      }
    }
    case 'ATTACHED': {
      const leases = leasesOf(node, eni).slice(0, Math.max(0, leaseRoom));
      await deps.store.putLeases(leases, deps.clock.nowMs());
      leased.push(...leases.map((l) => l.ip));
      return { ...eni, step: 'LEASED' };
    }
    default:
      return eni;
  }
}

export function leasesOf(
  node: NodeRecord,
  eni: EniRecord,
  ips?: readonly string[],
  prefixes?: readonly string[],
): NewLease[] {
  if (!eni.eniId || !eni.mac || !eni.subnetCidr) return [];
  const placement = {
    instanceArn: node.instanceArn,
    eniId: eni.eniId,
    deviceIndex: eni.deviceIndex,
    mac: eni.mac,
    subnetId: eni.subnetId,
    subnetCidr: eni.subnetCidr,
    gateway: subnetGateway(eni.subnetCidr),
  };
  const out: NewLease[] = [];
  for (const ip of ips ?? eni.addresses) out.push({ ...placement, ip });
  for (const prefix of prefixes ?? eni.prefixes)
    for (const ip of addressesOf(prefix)) out.push({ ...placement, ip, prefix });
  return out;
}
