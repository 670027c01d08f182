import type { NodePhase, NodeRecord } from '../domain/node.js';
import { isEc2Error } from '../ec2/errors.js';
import type { Ec2Instance } from '../ec2/port.js';
import { eniLeases } from '../lifecycle/pod-eni.js';
import { candidateSubnets } from '../lifecycle/subnets.js';
import { withdrawLeasesIfNodeLeft } from '../lifecycle/withdraw-leases.js';
import { isSubnetFullCode, type SubnetFullCode } from '../planner/subnet-choice.js';
import type { PoolDeps } from './deps.js';
import { enisInProgress, planNewEni } from './new-eni.js';
import { editNodeEnis, withAddresses } from './node-record.js';
import { SubnetHolds } from './subnet-holds.js';
import { type AssignStep, type ClosedSubnets, type PoolEni, planTopUp, type TopUpPlan } from './topup-plan.js';

const READY: ReadonlySet<NodePhase> = new Set(['READY']);

export interface TopUpResult {
  /** Addresses leased by Assign calls in this run. */
  readonly leased: string[];
  /** A new ENI is in progress on the node item (the caller advances it). */
  readonly plannedEni: boolean;
  readonly shortfall: number;
  /** Subnets this run planned around: EC2 refused them for room within the hold (subnet-holds.ts). */
  readonly subnetsOnHold: readonly string[];
}

/** Reads the instance once, on demand: the fast path never needs it. */
export type InstanceReader = () => Promise<Ec2Instance>;

/**
 * Adds `needed` addresses to a READY node: AssignPrivateIpAddresses on pod ENIs with room, else a new ENI
 * (recorded PLANNED; `advanceNewEnis` takes it through create/attach/lease).
 *
 * Fast path: the node item knows its pod ENIs and their addresses, so when they have room the top-up is one
 * Assign call and no Describe (the claim-to-claimable latency is what pods wait on). EC2 is read only when a
 * new ENI is needed, or when an Assign hits the ENI's limit (the node item missed addresses: see below) —
 * then the plan is redone from EC2's view.
 *
 * An Assign refused for subnet room closes that subnet for this run and the hold (SubnetHolds), and the rest
 * is replanned from EC2 around it: other ENIs, a new ENI in another subnet of the AZ, or single addresses.
 * Each refusal closes one more (subnet, kind of request), so the replanning ends.
 *
 * Each Assign is followed by two writes, in this order:
 *   1. the addresses onto the node item's ENI record — the intent log: from here on the pool's adoption step
 *      (pool-manager.ts) finds them and leases them should this run die before step 2;
 *   2. the FREE leases (conditional puts: a concurrent adoption of the same addresses is harmless).
 * A crash between the Assign and step 1 leaves addresses in EC2 that nothing records: the reconciler reports
 * them as drift (address-without-lease); Assign has no idempotency token, so that window cannot be closed
 * from this side — it is one node write wide.
 */
export async function topUp(
  deps: PoolDeps,
  node: NodeRecord,
  readInstance: InstanceReader,
  needed: number,
  leaseRoom: number,
): Promise<TopUpResult> {
  const holds = new SubnetHolds(deps, node.instanceArn, node.subnetRefusals);
  if (holds.closeAllOf(node))
    return { leased: [], plannedEni: false, shortfall: needed, subnetsOnHold: holds.onHold() };
  const leased: string[] = [];
  let plan = await planFromNodeItem(deps, node, needed, holds.closed);
  let fromRecord = plan !== undefined && plan.shortfall === 0;
  if (!plan || !fromRecord) plan = await planFromEc2(deps, node, await readInstance(), needed, holds.closed);
  for (;;) {
    try {
      const refused = await assignAll(deps, node, plan.assign, leaseRoom, leased);
      if (!refused) break;
      await holds.refuse(refused.subnetId, refused.code, refused.forPrefixes);
    } catch (err) {
      if (!(fromRecord && isEc2Error(err, 'limit'))) throw err;
      deps.logger.warn('node item undercounts an ENI’s addresses; replanning from EC2', {
        instanceArn: node.instanceArn,
        err,
      });
    }
    fromRecord = false;
    const current = (await deps.store.getNode(node.instanceArn)) ?? node;
    plan = await planFromEc2(deps, current, await readInstance(), needed - leased.length, holds.closed);
  }
  const next = plan.newEnis[0];
  const after = next ? await planNewEni(deps, node, next) : undefined;
  const plannedEni = after !== undefined && enisInProgress(after).length > 0;
  return { leased, plannedEni, shortfall: plan.shortfall, subnetsOnHold: holds.onHold() };
}

/** An Assign EC2 refused for lack of room in the ENI's subnet. */
interface AssignRefusal {
  readonly subnetId: string;
  readonly code: SubnetFullCode;
  readonly forPrefixes: boolean;
}

/** Runs the Assign steps in order; stops at the first one refused for subnet room and says which. */
async function assignAll(
  deps: PoolDeps,
  node: NodeRecord,
  steps: readonly AssignStep[],
  leaseRoom: number,
  leased: string[],
): Promise<AssignRefusal | undefined> {
  const { ec2, store, clock } = deps;
  for (const step of steps) {
    let got: { ips: string[]; prefixes: string[] };
    try {
      got = await ec2.assignPrivateIpAddresses(step.eniId, {
        ...(step.ipCount > 0 ? { ipCount: step.ipCount } : {}),
        ...(step.prefixCount > 0 ? { prefixCount: step.prefixCount } : {}),
      });
    } catch (err) {
      const subnetId = node.enis.find((e) => e.eniId === step.eniId)?.subnetId;
      if (!(isEc2Error(err) && isSubnetFullCode(err.code) && subnetId)) throw err;
      return { subnetId, code: err.code, forPrefixes: step.prefixCount > 0 };
    }
    const recorded = await editNodeEnis(store, node.instanceArn, clock.nowMs(), (enis, current) =>
      current.phase === 'READY'
        ? enis.map((e) => (e.eniId === step.eniId ? withAddresses(e, got.ips, got.prefixes) : e))
        : undefined,
    );
    const record = recorded?.enis.find((e) => e.eniId === step.eniId);
    // The node is terminating (or gone): its ENIs go with the instance; lease nothing.
    if (recorded?.phase !== 'READY' || !record) return undefined;
    const leases = eniLeases(recorded, record, got.ips, got.prefixes).slice(0, Math.max(0, leaseRoom - leased.length));
    await store.putLeases(leases, clock.nowMs());
    const ips = leases.map((l) => l.ip);
    if (!(await withdrawLeasesIfNodeLeft(store, clock.nowMs(), node.instanceArn, ips, READY))) return undefined;
    leased.push(...leases.map((l) => l.ip));
  }
  return undefined;
}

/** The plan from the node item alone; undefined when the item lacks the limits. New ENIs are never planned. */
async function planFromNodeItem(
  deps: PoolDeps,
  node: NodeRecord,
  needed: number,
  closed: ClosedSubnets,
): Promise<TopUpPlan | undefined> {
  if (!node.limits) return undefined;
  const enis: PoolEni[] = node.enis
    .filter((r) => r.step === 'LEASED' && r.eniId)
    .map((r) => ({
      eniId: r.eniId!,
      deviceIndex: r.deviceIndex,
      subnetId: r.subnetId,
      slotsUsed: r.addresses.length + r.prefixes.length,
    }));
  const plan = planTopUp({
    needed,
    limits: node.limits,
    prefixDelegation: deps.config.prefixDelegation,
    availabilityZone: node.availabilityZone,
    enis,
    interfaces: [],
    // No subnet known: new ENIs are left out (shortfall), which sends the caller to EC2 — also before any
    // fallback to single addresses, which comes only after other subnets' /28s.
    subnets: [],
    closed,
  });
  return plan;
}

async function planFromEc2(
  deps: PoolDeps,
  node: NodeRecord,
  instance: Ec2Instance,
  needed: number,
  closed: ClosedSubnets,
): Promise<TopUpPlan> {
  const { config, ec2 } = deps;
  const limits = node.limits ?? (await ec2.describeInstanceLimits(instance.instanceType));
  const byId = new Map(instance.interfaces.map((i) => [i.eniId, i]));
  const poolEnis: PoolEni[] = [];
  for (const record of node.enis) {
    if (record.step !== 'LEASED' || !record.eniId) continue;
    const seen = byId.get(record.eniId);
    if (!seen || seen.attachment?.instanceId !== instance.instanceId) continue;
    poolEnis.push({
      eniId: record.eniId,
      deviceIndex: record.deviceIndex,
      subnetId: record.subnetId,
      // The node item also counts what this run assigned after the instance was read.
      slotsUsed: Math.max(
        seen.secondaryIps.length + seen.prefixes.length,
        record.addresses.length + record.prefixes.length,
      ),
    });
  }
  const subnets = await candidateSubnets(ec2, config, instance);
  const known = new Set(subnets.map((s) => s.subnetId));
  const extra = [...new Set(poolEnis.map((e) => e.subnetId))].filter((id) => !known.has(id));
  if (extra.length > 0) subnets.push(...(await ec2.describeSubnets({ subnetIds: extra })));
  return planTopUp({
    needed,
    limits,
    prefixDelegation: config.prefixDelegation,
    availabilityZone: instance.availabilityZone,
    enis: poolEnis,
    interfaces: instance.interfaces.flatMap((i) =>
      i.attachment ? [{ deviceIndex: i.attachment.deviceIndex, networkCardIndex: i.attachment.networkCardIndex }] : [],
    ),
    subnets: subnets.map((s) => ({
      subnetId: s.subnetId,
      cidr: s.cidr,
      availabilityZone: s.availabilityZone,
      availableIpCount: s.availableIpCount,
    })),
    closed,
    addressFallback: config.prefixFallbackToAddresses,
  });
}
