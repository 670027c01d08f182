import { instanceArn } from '../domain/arn.js';
import { ADDRESSES_PER_PREFIX, type InstanceLimits } from '../domain/limits.js';
import type { EniRecord, NodeRecord } from '../domain/node.js';
import type { Ec2Eni, Ec2Instance, Ec2Port } from '../ec2/port.js';
import { containerPortOf } from '../ec2/prefetched-ec2.js';
import { ENI_TAGS, eniClientToken, LAUNCH_TEMPLATE_OWNER } from '../ec2/tags.js';
import { VersionConflictError } from '../errors.js';
import { maxPodsFor } from '../planner/max-pods.js';
import { type LifecycleDeps, type WaitOutcome, wait } from './deps.js';
import type { LaunchEvent } from './events.js';
import { isVpcCniEni, vpcCniReason } from './foreign-enis.js';
import { pendingNodeRecord } from './pending-node.js';

/**
 * - none: no pod ENI of this cluster's template on the instance: plan and create them instead;
 * - adopted: the node item written PROVISIONING with the ENIs ATTACHED, ready for the lease step;
 * - refused: a template ENI failed verification (or is the AWS VPC CNI's): the launch fails with `reason`;
 * - wait: an ENI or its subnet is not visible yet, or still attaching.
 */
export type Adoption =
  | { readonly kind: 'none' }
  | { readonly kind: 'adopted'; readonly node: NodeRecord }
  | { readonly kind: 'refused'; readonly node: NodeRecord | undefined; readonly reason: string }
  | WaitOutcome;

const NONE: Adoption = { kind: 'none' };

/** A pod ENI from the launch template that is not adopted, and why. */
export interface AdoptionRefusal {
  readonly eniId: string;
  readonly deviceIndex: number;
  readonly reason: string;
}

/** Subnet CIDRs never change: one DescribeSubnets per subnet for the life of the EC2 adapter (the container). */
const subnetCidrs = new WeakMap<Ec2Port, Map<string, Promise<string | undefined>>>();

/**
 * Launch-template adoption (DESIGN.md): EC2 created and attached the pod ENIs at RunInstances, so a PENDING
 * node only needs them verified and recorded. One DescribeNetworkInterfaces (tags are not in
 * DescribeInstances), then the node item goes PROVISIONING with the ENIs ATTACHED, and the launch's own
 * lease step and completion (launch.ts) write the FREE leases, READY and CONTINUE: no mutating EC2 call.
 *
 * Returns `none` when the instance has no pod ENI of this cluster's template (ENIs of device index ≥ 1
 * that are not tagged for the cluster belong to someone else and are left alone): create-and-attach then
 * plans around them. ENIs of the AWS VPC CNI are the exception: the launch fails (foreign-enis.ts). A template ENI that fails verification is a configuration error every node of the
 * group repeats, so the launch ABANDONs with `config:` and the reasons instead of spending create/attach calls
 * beside an ENI it cannot use; one still attaching waits.
 *
 * With no node item yet (`node` undefined, a launch's first look), the item is created already PROVISIONING:
 * one write instead of a PENDING item rewritten at once. A racing duplicate that created it first makes this
 * one wait and resume from what that one recorded.
 */
export async function adoptTemplateEnis(
  deps: LifecycleDeps,
  event: LaunchEvent,
  node: NodeRecord | undefined,
  instance: Ec2Instance,
  limits: InstanceLimits,
): Promise<Adoption> {
  if (!instance.interfaces.some((i) => (i.attachment?.deviceIndex ?? 0) >= 1)) return NONE;
  const log = deps.logger.child({ instanceId: instance.instanceId, flow: 'launch' });
  const attached = await deps.ec2.describeNetworkInterfaces({ attachedTo: instance.instanceId });
  // DescribeInstances saw them, a lagging DescribeNetworkInterfaces may not yet: wait rather than plan around them.
  const seen = new Set(attached.map((e) => e.eniId));
  if (instance.interfaces.some((i) => (i.attachment?.deviceIndex ?? 0) >= 1 && !seen.has(i.eniId)))
    return wait("the instance's ENIs are not visible to DescribeNetworkInterfaces yet");
  const candidates = attached.filter((e) => (e.attachment?.deviceIndex ?? 0) >= 1);
  const ours = candidates.filter((e) => isTemplateEni(e, deps.config.clusterName));
  const foreign = candidates.filter((e) => !ours.includes(e));
  const refuse = async (reason: string): Promise<Adoption> => {
    // Without an item yet, the pending one is written first, so the FAILED item keeps the type and zone.
    const fresh = node ? undefined : pendingNodeRecord(deps, event, instanceArnOf(event), instance, limits);
    const stored = node ?? (fresh && (await deps.store.createNode(fresh)) ? fresh : undefined);
    return { kind: 'refused', node: stored, reason };
  };
  const vpcCni = foreign.filter(isVpcCniEni);
  if (vpcCni.length > 0) return refuse(vpcCniReason(instance.instanceId, vpcCni));
  if (foreign.length > 0)
    log.info('ENIs not tagged as this cluster’s launch-template ENIs are not adopted', {
      enis: foreign.map((e) => e.eniId),
    });
  if (ours.length === 0) return NONE;
  const family = node?.ipFamily ?? deps.config.ipFamily;
  // A template declares IPv4 only (planTemplateEnis refuses other families): leasing it would give IPv6 pods nothing.
  if (family !== 'ipv4')
    return refuse(
      `config: launch-template pod ENIs are IPv4 only; an ${family} node needs its ENIs created by the launch`,
    );
  if (ours.some((e) => e.attachment?.status === 'attaching'))
    return wait('launch-template ENIs still attaching', 'attaching');
  const refusals = ours.flatMap((e) => verify(e, instance, deps.config.prefixDelegation));
  if (refusals.length > 0) {
    const reasons = refusals.map((r) => `${r.eniId} (device ${r.deviceIndex}): ${r.reason}`).join('; ');
    return refuse(`config: launch-template pod ENIs not adopted: ${reasons}`);
  }
  // The figure kubelet is given caps the leases, exactly as for a planned launch.
  const maxPods = maxPodsFor(limits, {
    prefixDelegation: deps.config.prefixDelegation,
    capPods: deps.config.maxPods,
    ipFamily: deps.config.ipFamily,
  });
  const addresses = ours.reduce((n, e) => n + e.secondaryIps.length + e.prefixes.length * ADDRESSES_PER_PREFIX, 0);
  if (Math.min(addresses, maxPods) < deps.config.minLeases)
    return refuse(
      `config: the launch template's pod ENIs carry ${addresses} addresses, below minLeases ${deps.config.minLeases}`,
    );

  const cidrs = await cidrsOf(deps.ec2, [...new Set(ours.map((e) => e.subnetId))]);
  // Without the CIDR a lease has no gateway: wait for DescribeSubnets to see the subnet rather than lease nothing.
  if (ours.some((e) => !cidrs.has(e.subnetId))) return wait('subnet of a launch-template ENI not visible yet');
  const enis = ours
    .map((e) => adoptedRecord(instance.instanceId, e, cidrs.get(e.subnetId)))
    .sort((a, b) => a.deviceIndex - b.deviceIndex);
  const adopted: NodeRecord = {
    ...(node ?? pendingNodeRecord(deps, event, instanceArnOf(event), instance, limits)),
    phase: 'PROVISIONING',
    enis,
    maxPods,
    podSubnetIds: [...new Set(enis.map((e) => e.subnetId))],
    updatedAtMs: deps.clock.nowMs(),
  };
  const saved = node ? await deps.store.updateNode(adopted, node.version) : await createAdopted(deps, adopted);
  log.info('launch-template pod ENIs adopted', { enis: enis.map((e) => ({ eniId: e.eniId, d: e.deviceIndex })) });
  return { kind: 'adopted', node: saved };
}

/** The first write of the node item; losing it to a concurrent invocation is a version conflict (runLaunch waits). */
async function createAdopted(deps: LifecycleDeps, adopted: NodeRecord): Promise<NodeRecord> {
  if (await deps.store.createNode(adopted)) return adopted;
  throw new VersionConflictError(adopted.instanceArn, 0);
}

const instanceArnOf = (e: LaunchEvent): string => instanceArn(e.region, e.accountId, e.instanceId, e.partition);

function isTemplateEni(eni: Ec2Eni, clusterName: string): boolean {
  return eni.tags[ENI_TAGS.cluster] === clusterName && eni.tags[ENI_TAGS.owner] === LAUNCH_TEMPLATE_OWNER;
}

/** Every check an adopted ENI must pass; what fails is reported, never repaired (that would be a mutating call). */
export function verify(eni: Ec2Eni, instance: Ec2Instance, prefixDelegation: boolean): AdoptionRefusal[] {
  const att = eni.attachment;
  const deviceIndex = att?.deviceIndex ?? -1;
  const refuse = (reason: string): AdoptionRefusal => ({ eniId: eni.eniId, deviceIndex, reason });
  const out: AdoptionRefusal[] = [];
  if (att?.instanceId !== instance.instanceId) out.push(refuse(`attached to ${att?.instanceId ?? 'nothing'}`));
  if (deviceIndex < 1) out.push(refuse('device index 0 is the boot ENI'));
  if (att && att.status !== 'attached') out.push(refuse(`attachment is ${att.status}`));
  if (eni.vpcId !== instance.vpcId) out.push(refuse(`in ${eni.vpcId}, not the instance's ${instance.vpcId}`));
  if (!att?.deleteOnTermination) out.push(refuse('DeleteOnTermination is off (it would outlive the instance)'));
  if (eni.secondaryIps.length === 0 && eni.prefixes.length === 0) out.push(refuse('no secondary address or prefix'));
  if (prefixDelegation && eni.secondaryIps.length > 0)
    out.push(refuse('secondary addresses while prefix delegation is on'));
  if (!prefixDelegation && eni.prefixes.length > 0) out.push(refuse('/28 prefixes while prefix delegation is off'));
  return out;
}

function adoptedRecord(instanceId: string, e: Ec2Eni, subnetCidr: string | undefined): EniRecord {
  const att = e.attachment!;
  const counts = { subnetId: e.subnetId, ipCount: e.secondaryIps.length, prefixCount: e.prefixes.length };
  return {
    deviceIndex: att.deviceIndex,
    networkCardIndex: att.networkCardIndex,
    subnetId: e.subnetId,
    ...(subnetCidr ? { subnetCidr } : {}),
    // Never sent (the ENI exists); kept so the record has the shape every other pod ENI has.
    clientToken: eniClientToken(instanceId, att.deviceIndex, counts),
    step: 'ATTACHED',
    eniId: e.eniId,
    attachmentId: att.attachmentId,
    mac: e.mac,
    addresses: [...e.secondaryIps],
    prefixes: [...e.prefixes],
    deleteOnTermination: true,
    plannedIpCount: counts.ipCount,
    plannedPrefixCount: counts.prefixCount,
  };
}

async function cidrsOf(ec2: Ec2Port, subnetIds: readonly string[]): Promise<Map<string, string>> {
  let cache = subnetCidrs.get(containerPortOf(ec2));
  if (!cache) {
    cache = new Map();
    subnetCidrs.set(containerPortOf(ec2), cache);
  }
  const known = cache;
  const missing = subnetIds.filter((id) => !known.has(id));
  if (missing.length > 0) {
    // One call shared by every record of a batch that misses at once; a failed or partial answer is not kept.
    const asked = ec2
      .describeSubnets({ subnetIds: missing })
      .then((found) => new Map(found.map((s) => [s.subnetId, s.cidr])));
    for (const id of missing)
      known.set(
        id,
        asked.then((m) => m.get(id)),
      );
    asked.catch(() => {
      for (const id of missing) known.delete(id);
    });
  }
  const out = new Map<string, string>();
  for (const id of subnetIds) {
    const cidr = await known.get(id);
    if (cidr) out.set(id, cidr);
    else known.delete(id);
  }
  return out;
}
