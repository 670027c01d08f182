import { LEASE_STATES, type Lease, MAX_CONTAINER_ID_CHARS } from '../domain/lease.js';
import { addressInPrefix } from '../domain/lease-address.js';
import type { EniRecord, NodeRecord } from '../domain/node.js';
import type { Ec2Eni } from '../ec2/port.js';
import { ENI_TAGS } from '../ec2/tags.js';
import { cidrContains, isIpv4, parseCidr, parseIpv4 } from '../ipv4.js';
import { canonicalIpv6, ipFamilyOf, isIpv6 } from '../ipv6.js';
import type { Logger } from '../log.js';
import { METRIC_DIMENSIONS, METRIC_NAMES, type Metrics } from '../metrics.js';
import type { PoolDeps } from './deps.js';

/**
 * DESIGN.md invariant 8: a node may write its own lease items (state, holder, times), so a lease is a claim,
 * never an order. Before any EC2 change derived from a lease the control plane checks it against what it wrote
 * itself (the node item's ENI records) and against EC2; anything that does not fit is rejected, logged and
 * counted (`UntrustedLeaseRejected{Reason}`), never acted on.
 */
export const UNTRUSTED_REASONS = [
  /** The item does not decode as a lease or node item at all (missing or mistyped attributes). */
  'ill-formed',
  /** Impossible fields: state and holder disagree, times in the future, bad numbers, oversized strings. */
  'impossible',
  /** The ENI, address or prefix is not what the node item records for this instance. */
  'not-recorded',
  /** EC2 does not know the ENI. */
  'eni-missing',
  /** EC2 shows the ENI attached to another instance, or to none. */
  'eni-elsewhere',
  /** The ENI lacks this cluster's tag. */
  'eni-untagged',
  /** EC2 does not show the address (or /28) on that ENI. */
  'address-not-on-eni',
] as const;
export type UntrustedReason = (typeof UNTRUSTED_REASONS)[number];

/** How far ahead of the control plane's clock a node's clock may run before its times are impossible. */
export const MAX_CLOCK_SKEW_MS = 5 * 60_000;
/** Longer holder fields than this are no container id, interface, netns path or pod name. */
export const MAX_HOLDER_FIELD_CHARS = 512;

export interface Rejection {
  readonly ip: string;
  readonly reason: UntrustedReason;
  readonly detail: string;
}

/** Why a lease read from a node's partition is impossible on its own, or undefined when it is possible. */
export function impossibility(lease: Lease, nowMs: number, reuseWaitMs: number): string | undefined {
  if (!LEASE_STATES.includes(lease.state)) return `unknown state ${lease.state}`;
  if (!isIpv4(lease.ip) && !(isIpv6(lease.ip) && canonicalIpv6(lease.ip) === lease.ip))
    return `bad address ${JSON.stringify(lease.ip)}`;
  if (!Number.isSafeInteger(lease.version) || lease.version < 1) return `bad version ${lease.version}`;
  if ((lease.state === 'CLAIMED') !== (lease.holder !== undefined)) return `${lease.state} with holder mismatch`;
  const latest = nowMs + MAX_CLOCK_SKEW_MS;
  const times: [string, number | undefined, number][] = [
    ['createdAtMs', lease.createdAtMs, latest],
    ['claimedAtMs', lease.claimedAtMs, latest],
    ['releasedAtMs', lease.releasedAtMs, latest],
    // A release sets reusableAt to its own time plus the cooldown.
    ['reusableAtMs', lease.reusableAtMs, latest + reuseWaitMs],
  ];
  for (const [name, value, max] of times) {
    if (value === undefined) continue;
    if (!Number.isSafeInteger(value) || value < 0 || value > max) return `${name} ${value} is impossible`;
  }
  const holder = lease.holder;
  if (holder) {
    for (const [name, value] of Object.entries(holder)) {
      const maxChars = name === 'containerId' ? MAX_CONTAINER_ID_CHARS : MAX_HOLDER_FIELD_CHARS;
      if (typeof value === 'string' && value.length > maxChars) return `holder ${name} is oversized`;
    }
  }
  return undefined;
}

/** The node item's record of the ENI a lease names, when it records the lease's address (or /28) on it. */
export function recordFor(node: NodeRecord, lease: Lease): EniRecord | undefined {
  const record = node.enis.find((e) => e.eniId === lease.eniId);
  if (!record || record.deviceIndex !== lease.deviceIndex) return undefined;
  if (record.mac !== undefined && record.mac !== lease.mac) return undefined;
  if (record.subnetId !== lease.subnetId) return undefined;
  if (ipFamilyOf(lease.ip) === 'ipv6')
    return lease.prefix !== undefined &&
      (record.ipv6Prefixes ?? []).includes(lease.prefix) &&
      addressInPrefix(lease.prefix, lease.ip)
      ? record
      : undefined;
  if (lease.prefix === undefined) return record.addresses.includes(lease.ip) ? record : undefined;
  if (!record.prefixes.includes(lease.prefix)) return undefined;
  try {
    return cidrContains(parseCidr(lease.prefix), parseIpv4(lease.ip)) ? record : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Splits a node's leases into those the control plane may act on and the rejected ones: each must be possible
 * and must match an ENI record of the node item (RELEASING leases whose address a finished Unassign already
 * dropped from the record are `unrecorded`: only their lease may be deleted, nothing asked of EC2). IPv6 leases
 * inside a recorded /80 are `ipv6`: the launch wrote them all with the /80 and the pool neither counts nor
 * releases them (its watermarks are about IPv4 addresses, which cost subnet room).
 */
export function screenLeases(
  node: NodeRecord,
  leases: readonly Lease[],
  nowMs: number,
  reuseWaitMs: number,
): { trusted: Lease[]; unrecorded: Lease[]; ipv6: Lease[]; rejected: Rejection[] } {
  const trusted: Lease[] = [];
  const ipv6: Lease[] = [];
  const unrecorded: Lease[] = [];
  const rejected: Rejection[] = [];
  for (const lease of leases) {
    const impossible = lease.instanceArn !== node.instanceArn ? 'lease of another partition' : undefined;
    const why = impossible ?? impossibility(lease, nowMs, reuseWaitMs);
    if (why) {
      rejected.push({ ip: lease.ip, reason: 'impossible', detail: why });
    } else if (recordFor(node, lease)) {
      (ipFamilyOf(lease.ip) === 'ipv6' ? ipv6 : trusted).push(lease);
    } else if (lease.state === 'RELEASING' && node.enis.some((e) => e.eniId === lease.eniId)) {
      unrecorded.push(lease);
    } else {
      rejected.push({
        ip: lease.ip,
        reason: 'not-recorded',
        detail: `${lease.eniId} ${lease.prefix ?? lease.ip} is not recorded for ${node.instanceId}`,
      });
    }
  }
  return { trusted, unrecorded, ipv6, rejected };
}

/**
 * Why EC2 refutes an Unassign of `target` on `eni` for `instanceId`, or undefined when EC2 confirms it: the ENI
 * is attached to that very instance, carries this cluster's tag, and holds each address (as a secondary
 * address, never the primary) or the /28.
 */
export function ec2Refutes(
  eni: Ec2Eni | undefined,
  instanceId: string,
  clusterName: string,
  target: { readonly ips?: readonly string[]; readonly prefixes?: readonly string[] },
): Rejection | undefined {
  const first = target.prefixes?.[0] ?? target.ips?.[0] ?? '';
  const reject = (reason: UntrustedReason, detail: string): Rejection => ({ ip: first, reason, detail });
  if (!eni) return reject('eni-missing', 'EC2 does not know the ENI');
  const att = eni.attachment;
  if (att?.instanceId !== instanceId || (att.status !== 'attached' && att.status !== 'attaching'))
    return reject('eni-elsewhere', `${eni.eniId} is attached to ${att?.instanceId ?? 'nothing'}, not ${instanceId}`);
  if (eni.tags[ENI_TAGS.cluster] !== clusterName) return reject('eni-untagged', `${eni.eniId} is not ${clusterName}'s`);
  const missingPrefix = (target.prefixes ?? []).find((p) => !eni.prefixes.includes(p));
  if (missingPrefix) return reject('address-not-on-eni', `${missingPrefix} is not on ${eni.eniId}`);
  const missingIp = (target.ips ?? []).find((ip) => !eni.secondaryIps.includes(ip));
  if (missingIp) return reject('address-not-on-eni', `${missingIp} is not a secondary address of ${eni.eniId}`);
  return undefined;
}

/** Logs and counts rejections; never throws. */
export function reportRejected(deps: PoolDeps, instanceArn: string, rejected: readonly Rejection[]): void {
  for (const r of rejected) {
    deps.logger.warn('untrusted lease rejected; nothing done with it', { instanceArn, ...r });
    deps.metrics?.add(METRIC_NAMES.untrustedLeaseRejected, {
      [METRIC_DIMENSIONS.cluster]: deps.config.clusterName,
      [METRIC_DIMENSIONS.reason]: r.reason,
    });
  }
}

/** The lease store's `onIllFormedItem` for the Lambdas: an item that does not decode is a rejection too. */
export function reportIllFormed(
  logger: Logger,
  metrics: Metrics | undefined,
  clusterName: string,
): (key: { pk?: string; sk?: string }, error: unknown) => void {
  return (key, error) => {
    logger.warn('ill-formed item skipped; nothing done with it', { ...key, err: error });
    metrics?.add(METRIC_NAMES.untrustedLeaseRejected, {
      [METRIC_DIMENSIONS.cluster]: clusterName,
      [METRIC_DIMENSIONS.reason]: 'ill-formed',
    });
  };
}
