import type { Lease } from '../domain/lease.js';

/**
 * One UnassignPrivateIpAddresses call's worth of release: secondary addresses of one ENI, or one delegated
 * /28 (EC2 unassigns a prefix whole, so every lease of it must be released together).
 */
export interface ReleaseGroup {
  readonly eniId: string;
  readonly ips: readonly string[];
  /** Set when the group is a delegated prefix: Unassign takes the prefix, not its addresses. */
  readonly prefix?: string;
}

export function isReleasable(lease: Lease, nowMs: number, releaseDelayMs: number): boolean {
  return (lease.state === 'FREE' || lease.state === 'COOLDOWN') && (lease.reusableAtMs ?? 0) <= nowMs - releaseDelayMs;
}

interface Unit {
  readonly eniId: string;
  readonly ips: string[];
  readonly prefix?: string;
  oldestMs: number;
}

/**
 * Chooses which leases to release, at most `excess` addresses:
 * - only releasable leases (FREE or COOLDOWN, claimable for at least the release delay);
 * - a prefix only when every lease of it is releasable, and only whole (it may not fit the excess: then it
 *   stays — releasing less is always safe, releasing more would cross the low watermark);
 * - the longest idle first (oldest reusableAt), so recently used addresses — likely warm in ARP caches and
 *   conntrack of peers — stay; ties by address for a deterministic plan.
 * Secondary addresses of one ENI are grouped into one Unassign call.
 */
export function planRelease(
  leases: readonly Lease[],
  excess: number,
  nowMs: number,
  releaseDelayMs: number,
): ReleaseGroup[] {
  if (excess <= 0) return [];
  const units: Unit[] = [];
  const prefixes = new Map<string, { leases: Lease[] }>();
  for (const lease of leases) {
    if (lease.prefix !== undefined) {
      const key = `${lease.eniId}|${lease.prefix}`;
      const entry = prefixes.get(key) ?? { leases: [] };
      entry.leases.push(lease);
      prefixes.set(key, entry);
    } else if (isReleasable(lease, nowMs, releaseDelayMs)) {
      units.push({ eniId: lease.eniId, ips: [lease.ip], oldestMs: lease.reusableAtMs ?? 0 });
    }
  }
  for (const { leases: members } of prefixes.values()) {
    if (!members.every((l) => isReleasable(l, nowMs, releaseDelayMs))) continue;
    const first = members[0]!;
    units.push({
      eniId: first.eniId,
      ips: members.map((l) => l.ip).sort(compareIps),
      prefix: first.prefix!,
      // A prefix is as idle as its most recently used address.
      oldestMs: Math.max(...members.map((l) => l.reusableAtMs ?? 0)),
    });
  }
  units.sort((a, b) => a.oldestMs - b.oldestMs || compareIps(a.ips[0]!, b.ips[0]!));

  let left = excess;
  const singles = new Map<string, string[]>();
  const groups: ReleaseGroup[] = [];
  for (const unit of units) {
    if (left <= 0) break;
    if (unit.ips.length > left) continue;
    left -= unit.ips.length;
    if (unit.prefix !== undefined) groups.push({ eniId: unit.eniId, ips: unit.ips, prefix: unit.prefix });
    else singles.set(unit.eniId, [...(singles.get(unit.eniId) ?? []), ...unit.ips]);
  }
  for (const [eniId, ips] of singles) groups.push({ eniId, ips: ips.sort(compareIps) });
  return groups;
}

export function compareIps(a: string, b: string): number {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < 4; i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}
