import type { Lease } from '../domain/lease.js';
import { addressInPrefix, addressOnEni } from '../domain/lease-address.js';
import type { Ec2Port } from '../ec2/port.js';
import { ENI_TAGS, eniInstanceOf, LAUNCH_TEMPLATE_OWNER } from '../ec2/tags.js';
import type { LeaseStore } from '../lease-store/port.js';

/**
 * Compares EC2 (through the EC2 port, i.e. the SDK against AWS or the simulator) with the lease store and
 * reports violations of DESIGN.md invariants 2–6. Meant for quiescent moments (after a test's events have
 * drained, or periodically under `npm start`): a launch or release in flight may show a transient violation,
 * which is why in-progress nodes get the slack noted at each check.
 */
export type InvariantId = 2 | 3 | 4 | 5 | 6;

export interface InvariantViolation {
  readonly invariant: InvariantId;
  readonly message: string;
  readonly instanceArn?: string;
  readonly eniId?: string;
  readonly ip?: string;
}

export interface InvariantReport {
  readonly violations: readonly InvariantViolation[];
  readonly counts: { readonly nodes: number; readonly leases: number; readonly enis: number };
}

export interface InvariantCheckOptions {
  readonly clusterName: string;
  readonly minLeases: number;
  readonly nowMs: number;
  /** An unattached vpc-lease ENI older than this is a leak (3). Tests pass 0; a live system its GC bound. */
  readonly maxUnattachedAgeMs: number;
  /** A node PENDING or PROVISIONING for longer than this was left to time out (4). */
  readonly maxProvisioningMs: number;
}

const IN_PROGRESS = new Set(['PENDING', 'PROVISIONING']);
const REQUIRED_TAGS = [ENI_TAGS.cluster, ENI_TAGS.instance, ENI_TAGS.owner, ENI_TAGS.createdAt];
/** A launch template's tags are the same for every instance: its ENIs carry the cluster and owner only. */
const TEMPLATE_TAGS = [ENI_TAGS.cluster, ENI_TAGS.owner];

export async function checkInvariants(
  ec2: Ec2Port,
  store: LeaseStore,
  options: InvariantCheckOptions,
): Promise<InvariantReport> {
  const violations: InvariantViolation[] = [];
  const report = (v: InvariantViolation): void => {
    violations.push(v);
  };
  const nodes = await store.listNodes();
  const leasesByNode = new Map<string, Lease[]>();
  for (const node of nodes) leasesByNode.set(node.instanceArn, await store.listLeases(node.instanceArn));
  // EC2 tags every ENI a launch creates, so a launch template's tags reach the boot ENI too: never a pod ENI.
  const enis = (await ec2.describeNetworkInterfaces({ tags: { [ENI_TAGS.cluster]: options.clusterName } })).filter(
    (e) => !(e.tags[ENI_TAGS.owner] === LAUNCH_TEMPLATE_OWNER && e.attachment?.deviceIndex === 0),
  );
  const eniById = new Map(enis.map((e) => [e.eniId, e]));
  const nodeByInstance = new Map(nodes.map((n) => [n.instanceId, n]));
  const instanceState = new Map<string, string>();
  for (const id of new Set([...nodes.map((n) => n.instanceId), ...enis.map((e) => eniInstanceOf(e) ?? '')])) {
    if (!id) continue;
    instanceState.set(id, (await ec2.describeInstance(id))?.state ?? 'unknown');
  }

  // 2 and 6: every non-RELEASING lease's address is on its ENI, which is on the lease's own instance; an
  // address is leased in one partition only; a gone node keeps no lease.
  const owners = new Map<string, string>();
  for (const node of nodes) {
    for (const lease of leasesByNode.get(node.instanceArn) ?? []) {
      const where = { instanceArn: node.instanceArn, ip: lease.ip, eniId: lease.eniId };
      const other = owners.get(lease.ip);
      if (other && other !== node.instanceArn)
        report({ invariant: 6, ...where, message: `address ${lease.ip} is leased on ${other} as well` });
      owners.set(lease.ip, node.instanceArn);
      if (node.phase === 'GONE')
        report({ invariant: 6, ...where, message: `lease ${lease.ip} (${lease.state}) outlived its GONE node` });
      if (lease.state === 'RELEASING') continue;
      const eni = eniById.get(lease.eniId);
      if (!eni) {
        report({
          invariant: 2,
          ...where,
          message: `lease ${lease.ip} names ENI ${lease.eniId}, which EC2 does not have`,
        });
        continue;
      }
      if (!addressOnEni(eni, lease.ip))
        report({
          invariant: 2,
          ...where,
          message: `lease ${lease.ip} (${lease.state}) is not assigned to ${eni.eniId}`,
        });
      if (eni.attachment && eni.attachment.instanceId !== node.instanceId)
        report({
          invariant: 6,
          ...where,
          message: `ENI of lease ${lease.ip} is attached to ${eni.attachment.instanceId}`,
        });
    }
  }

  // 3: tagged, and either attached with DeleteOnTermination (slack: a launch in progress) or young.
  for (const eni of enis) {
    const instanceId = eniInstanceOf(eni) ?? '';
    const node = nodeByInstance.get(instanceId);
    const required = eni.tags[ENI_TAGS.owner] === LAUNCH_TEMPLATE_OWNER ? TEMPLATE_TAGS : REQUIRED_TAGS;
    const missing = required.filter((t) => !eni.tags[t]);
    if (missing.length > 0)
      report({ invariant: 3, eniId: eni.eniId, message: `ENI ${eni.eniId} lacks tags ${missing.join(', ')}` });
    const att = eni.attachment;
    if (att && att.status !== 'detached' && att.status !== 'detaching') {
      if (!att.deleteOnTermination && !(node && IN_PROGRESS.has(node.phase)))
        report({
          invariant: 3,
          eniId: eni.eniId,
          ...(node ? { instanceArn: node.instanceArn } : {}),
          message: `ENI ${eni.eniId} is attached to ${att.instanceId} without DeleteOnTermination (node ${node?.phase ?? 'unknown'})`,
        });
    } else {
      const createdAtMs = Date.parse(eni.tags[ENI_TAGS.createdAt] ?? '');
      const ageMs = Number.isNaN(createdAtMs) ? Number.POSITIVE_INFINITY : options.nowMs - createdAtMs;
      if (ageMs > options.maxUnattachedAgeMs && !(node && IN_PROGRESS.has(node.phase)))
        report({
          invariant: 3,
          eniId: eni.eniId,
          message: `ENI ${eni.eniId} of ${instanceId || 'no instance'} (${instanceState.get(instanceId) ?? 'unknown'}) is unattached and not deleted`,
        });
    }
  }

  // 4: a launch ends READY or FAILED with a reason; none is left in progress.
  for (const node of nodes) {
    const leases = leasesByNode.get(node.instanceArn) ?? [];
    if (node.phase === 'READY' && leases.length < options.minLeases)
      report({
        invariant: 4,
        instanceArn: node.instanceArn,
        message: `READY node has ${leases.length} leases, below minLeases ${options.minLeases}`,
      });
    if (node.phase === 'FAILED' && !node.failureReason)
      report({ invariant: 4, instanceArn: node.instanceArn, message: 'FAILED node has no reason recorded' });
    if (IN_PROGRESS.has(node.phase) && options.nowMs - node.updatedAtMs > options.maxProvisioningMs)
      report({
        invariant: 4,
        instanceArn: node.instanceArn,
        message: `node left ${node.phase} since ${new Date(node.updatedAtMs).toISOString()}`,
      });
  }

  // 5: no extra ENI (one per recorded device index, all recorded) and no lost lease (every address EC2
  // assigned on a READY node's pod ENIs is leased).
  for (const node of nodes) {
    const mine = enis.filter((e) => eniInstanceOf(e) === node.instanceId);
    const recorded = new Set(node.enis.map((e) => e.eniId).filter((id): id is string => id !== undefined));
    const byIndex = new Map<string, string[]>();
    for (const eni of mine) {
      const index = eni.tags[ENI_TAGS.deviceIndex] ?? String(eni.attachment?.deviceIndex ?? eni.eniId);
      byIndex.set(index, [...(byIndex.get(index) ?? []), eni.eniId]);
      if (!recorded.has(eni.eniId) && !IN_PROGRESS.has(node.phase) && node.phase !== 'GONE')
        report({
          invariant: 5,
          instanceArn: node.instanceArn,
          eniId: eni.eniId,
          message: `ENI ${eni.eniId} of ${node.instanceId} is not on the node item (${node.phase})`,
        });
    }
    for (const [index, ids] of byIndex)
      if (ids.length > 1)
        report({
          invariant: 5,
          instanceArn: node.instanceArn,
          message: `${ids.length} ENIs for device index ${index} of ${node.instanceId}: ${ids.join(', ')}`,
        });
    if (node.phase !== 'READY') continue;
    const leased = new Set((leasesByNode.get(node.instanceArn) ?? []).map((l) => l.ip));
    for (const eni of mine) {
      for (const ip of eni.secondaryIps)
        if (!leased.has(ip))
          report({
            invariant: 5,
            instanceArn: node.instanceArn,
            eniId: eni.eniId,
            ip,
            message: `address ${ip} on ${eni.eniId} has no lease`,
          });
      for (const prefix of [...eni.prefixes, ...(eni.ipv6Prefixes ?? [])]) {
        if (![...leased].some((ip) => addressInPrefix(prefix, ip)))
          report({
            invariant: 5,
            instanceArn: node.instanceArn,
            eniId: eni.eniId,
            message: `prefix ${prefix} on ${eni.eniId} has no lease`,
          });
      }
    }
  }
  return {
    violations,
    counts: {
      nodes: nodes.length,
      leases: [...leasesByNode.values()].reduce((s, l) => s + l.length, 0),
      enis: enis.length,
    },
  };
}

export function formatViolations(report: InvariantReport): string {
  return report.violations.map((v) => `invariant ${v.invariant}: ${v.message}`).join('\n');
}

/**
 * Check options for a live system (`npm start`, operators): an unattached ENI is a leak only once the
 * reconciler had its two passes over it, and a launch is stuck only after its hook could have timed out.
 */
export function liveCheckOptions(
  config: {
    readonly clusterName: string;
    readonly minLeases: number;
    readonly eniMinAgeForGcMs: number;
    readonly heartbeatTimeoutS: number;
  },
  nowMs: number,
  reconcileIntervalMs = 300_000,
): InvariantCheckOptions {
  return {
    clusterName: config.clusterName,
    minLeases: config.minLeases,
    nowMs,
    maxUnattachedAgeMs: config.eniMinAgeForGcMs + 2 * reconcileIntervalMs,
    maxProvisioningMs: config.heartbeatTimeoutS * 1000,
  };
}
