import { parseInstanceArn } from '../domain/arn.js';
import { LEASE_STATES, type LeaseHolder, type NewLease } from '../domain/lease.js';
import { IP_FAMILY_SETTINGS, NODE_PHASES, type NodeRecord } from '../domain/node.js';
import { ValidationError } from '../errors.js';
import { cidrContains, isIpv4, parseCidr, parseIpv4 } from '../ipv4.js';
import { canonicalIpv6, ipv6Within, isIpv6 } from '../ipv6.js';
import type { HolderRef, LeaseStore } from './port.js';
import { NODE_INDEX } from './table.js';

/**
 * Input checks shared by the DynamoDB adapter and the fake, so both reject the same inputs with the same
 * ValidationError — before anything is written.
 */
const ENI_ID = /^eni-[0-9a-f]{8}([0-9a-f]{9})?$/;
const SUBNET_ID = /^subnet-[0-9a-f]{8}([0-9a-f]{9})?$/;
const MAC = /^([0-9a-f]{2}:){5}[0-9a-f]{2}$/;

export function checkArn(instanceArn: string): void {
  parseInstanceArn(instanceArn);
}

/** An address as lease keys hold it: IPv4, or IPv6 in its one canonical spelling (another would miss the item). */
export function checkIp(ip: string): void {
  if (isIpv4(ip)) return;
  if (!isIpv6(ip) || canonicalIpv6(ip) !== ip) throw new ValidationError(`invalid IP address ${JSON.stringify(ip)}`);
}

export function checkTimeMs(name: string, value: number): void {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new ValidationError(`${name} must be a non-negative integer of milliseconds, got ${value}`);
  }
}

export function checkHolderRef(holder: HolderRef): void {
  const problems: string[] = [];
  if (typeof holder.containerId !== 'string' || holder.containerId.trim() === '') {
    problems.push('holder.containerId must not be empty');
  }
  if (typeof holder.ifName !== 'string' || holder.ifName.trim() === '') {
    problems.push('holder.ifName must not be empty');
  }
  if (problems.length > 0) throw new ValidationError(problems.join('; '), problems);
}

export function checkHolder(holder: LeaseHolder): void {
  checkHolderRef(holder);
  if (typeof holder.netns !== 'string' || holder.netns.trim() === '') {
    throw new ValidationError('holder.netns must not be empty');
  }
}

/** The address, gateway, subnet and prefix of a lease: one family, canonical, the address inside both CIDRs. */
function placementProblems(lease: NewLease, at: string): string[] {
  const v6 = isIpv6(lease.ip);
  if (!isIpv4(lease.ip) && !(v6 && canonicalIpv6(lease.ip) === lease.ip))
    return [`${at}.ip: invalid IP address ${JSON.stringify(lease.ip)}`];
  const problems: string[] = [];
  const sameFamily = v6
    ? isIpv6(lease.gateway) && canonicalIpv6(lease.gateway) === lease.gateway
    : isIpv4(lease.gateway);
  if (!sameFamily) problems.push(`${at}.gateway: invalid ${v6 ? 'IPv6' : 'IPv4'} address ${lease.gateway}`);
  const within = (cidr: string): boolean =>
    v6 ? ipv6Within(cidr, lease.ip) : cidrContains(parseCidr(cidr), parseIpv4(lease.ip));
  for (const [field, cidr, what] of [
    ['subnetCidr', lease.subnetCidr, 'subnet'],
    ['prefix', lease.prefix, 'its prefix'],
  ] as const) {
    if (cidr === undefined) continue;
    try {
      if (!within(cidr)) problems.push(`${at}.ip: ${lease.ip} is outside ${what} ${cidr}`);
    } catch {
      problems.push(`${at}.${field}: invalid CIDR ${JSON.stringify(cidr)}`);
    }
  }
  return problems;
}

/** Every problem of every lease at once, naming the lease and the field. */
export function checkNewLeases(leases: readonly NewLease[]): void {
  const problems: string[] = [];
  const seen = new Set<string>();
  leases.forEach((lease, i) => {
    const at = `leases[${i}]`;
    try {
      parseInstanceArn(lease.instanceArn);
    } catch {
      problems.push(`${at}.instanceArn: invalid instance ARN ${JSON.stringify(lease.instanceArn)}`);
    }
    if (!ENI_ID.test(lease.eniId)) problems.push(`${at}.eniId: invalid ENI id ${JSON.stringify(lease.eniId)}`);
    if (!Number.isInteger(lease.deviceIndex) || lease.deviceIndex < 0) {
      problems.push(`${at}.deviceIndex: must be a non-negative integer, got ${lease.deviceIndex}`);
    }
    if (!MAC.test(lease.mac)) problems.push(`${at}.mac: must be lower-case aa:bb:cc:dd:ee:ff, got ${lease.mac}`);
    if (!SUBNET_ID.test(lease.subnetId)) problems.push(`${at}.subnetId: invalid subnet id ${lease.subnetId}`);
    problems.push(...placementProblems(lease, at));
    const key = `${lease.instanceArn} ${lease.ip}`;
    if (seen.has(key)) problems.push(`${at}: ${lease.ip} appears twice for ${lease.instanceArn}`);
    seen.add(key);
  });
  if (problems.length > 0) {
    throw new ValidationError(`invalid leases: ${problems.join('; ')}`, problems);
  }
}

export function checkNode(node: NodeRecord): void {
  const problems: string[] = [];
  try {
    const parsed = parseInstanceArn(node.instanceArn);
    if (parsed.instanceId !== node.instanceId) {
      problems.push(`instanceId ${node.instanceId} does not match instanceArn ${node.instanceArn}`);
    }
  } catch {
    problems.push(`instanceArn: invalid instance ARN ${JSON.stringify(node.instanceArn)}`);
  }
  if (!NODE_PHASES.includes(node.phase)) problems.push(`phase: unknown phase ${JSON.stringify(node.phase)}`);
  if (!Number.isSafeInteger(node.version) || node.version < 0) {
    problems.push(`version: must be a non-negative integer, got ${node.version}`);
  }
  if (!Number.isInteger(node.maxPods) || node.maxPods < 0) problems.push(`maxPods: invalid ${node.maxPods}`);
  if (node.ipFamily !== undefined && !IP_FAMILY_SETTINGS.includes(node.ipFamily))
    problems.push(`ipFamily: unknown family ${JSON.stringify(node.ipFamily)}`);
  if (problems.length > 0) throw new ValidationError(`invalid node record: ${problems.join('; ')}`, problems);
}

/** A claim's defaults: candidates read per Query, and races lost before LeaseConflictError. */
export const CLAIM_DEFAULTS = { candidates: 16, maxAttempts: 8 } as const;

function checkCount(name: string, value: number): void {
  if (!Number.isInteger(value) || value < 1) throw new ValidationError(`${name} must be >= 1`);
}

/**
 * Each LeaseStore method's input checks, one entry a method with the method's own parameters. Both stores call
 * the entry first thing, so the fake cannot accept what the DynamoDB adapter refuses; the mapped type makes a
 * new port method need an entry.
 */
export const leaseStoreChecks: { readonly [K in keyof LeaseStore]: (...args: Parameters<LeaseStore[K]>) => void } = {
  putLeases: (leases, nowMs) => {
    checkNewLeases(leases);
    checkTimeMs('nowMs', nowMs);
  },
  claim: (instanceArn, holder, nowMs, options = {}) => {
    checkArn(instanceArn);
    checkHolder(holder);
    checkTimeMs('nowMs', nowMs);
    checkCount('candidates', options.candidates ?? CLAIM_DEFAULTS.candidates);
    checkCount('maxAttempts', options.maxAttempts ?? CLAIM_DEFAULTS.maxAttempts);
  },
  findByHolder: (instanceArn, containerId, ifName) => {
    checkArn(instanceArn);
    checkHolderRef({ containerId, ifName });
  },
  release: (instanceArn, holder, nowMs, reuseWaitMs, ip) => {
    checkArn(instanceArn);
    checkHolderRef(holder);
    checkTimeMs('nowMs', nowMs);
    checkTimeMs('reuseWaitMs', reuseWaitMs);
    if (ip !== undefined) checkIp(ip);
  },
  markReleasing: (instanceArn, ip, nowMs, freeSinceBeforeMs) => {
    checkArn(instanceArn);
    checkIp(ip);
    checkTimeMs('nowMs', nowMs);
    if (freeSinceBeforeMs !== undefined) checkTimeMs('freeSinceBeforeMs', freeSinceBeforeMs);
  },
  revertReleasing: (instanceArn, ip, nowMs) => {
    checkArn(instanceArn);
    checkIp(ip);
    checkTimeMs('nowMs', nowMs);
  },
  deleteReleasing: (instanceArn, ip) => {
    checkArn(instanceArn);
    checkIp(ip);
  },
  deleteNodePartition: checkArn,
  getLease: (instanceArn, ip) => {
    checkArn(instanceArn);
    checkIp(ip);
  },
  listLeases: (instanceArn, filter = {}) => {
    checkArn(instanceArn);
    if (filter.state !== undefined && !LEASE_STATES.includes(filter.state))
      throw new ValidationError(`unknown lease state ${JSON.stringify(filter.state)}`);
  },
  countClaimable: (instanceArn, nowMs) => {
    checkArn(instanceArn);
    checkTimeMs('nowMs', nowMs);
  },
  getNode: checkArn,
  createNode: checkNode,
  updateNode: (next, expectedVersion) => {
    checkNode(next);
    if (!Number.isSafeInteger(expectedVersion) || expectedVersion < 0)
      throw new ValidationError(`expectedVersion must be a non-negative integer, got ${expectedVersion}`);
  },
  acquirePassMarker: (instanceArn, _owner, nowMs, ttlMs) => {
    checkArn(instanceArn);
    checkTimeMs('nowMs', nowMs);
    checkTimeMs('ttlMs', ttlMs);
  },
  releasePassMarker: checkArn,
  listNodes: () => undefined,
  listNodeRefs: (from = { shard: 0 }, limit = 1000) => {
    if (!Number.isInteger(from.shard) || from.shard < 0 || from.shard > NODE_INDEX.shards)
      throw new ValidationError(`node cursor shard must be 0..${NODE_INDEX.shards}, got ${from.shard}`);
    if (from.afterArn !== undefined) checkArn(from.afterArn);
    checkCount('limit', limit);
  },
};
