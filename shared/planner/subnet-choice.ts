import { ADDRESSES_PER_PREFIX } from '../domain/limits.js';
import type { SubnetRefusal } from '../domain/node.js';
import { rankSubnets, type SubnetCandidate } from './subnets.js';

/**
 * EC2's answers for a subnet without room: no free address for the request, or (prefixes only) addresses
 * enough but no aligned /28 left, which happens as a subnet fragments and single addresses may still be had.
 */
export const SUBNET_FULL_CODES = ['InsufficientFreeAddressesInSubnet', 'InsufficientCidrBlocks'] as const;
export type SubnetFullCode = (typeof SUBNET_FULL_CODES)[number];

export function isSubnetFullCode(code: string): code is SubnetFullCode {
  return (SUBNET_FULL_CODES as readonly string[]).includes(code);
}

/** A subnet EC2 refused in this pass, and whether the refused request asked for prefixes. */
export interface RefusedSubnet {
  readonly subnetId: string;
  readonly code: SubnetFullCode;
  readonly forPrefixes: boolean;
}

export interface SubnetChoiceInput {
  /** What the refused ENI asked for (one of the two is 0). */
  readonly wanted: { readonly ipCount: number; readonly prefixCount: number };
  readonly candidates: readonly SubnetCandidate[];
  readonly availabilityZone: string;
  readonly refused: readonly RefusedSubnet[];
  /** In prefix mode, ask for single addresses where no /28 can be had (`prefixFallbackToAddresses`). */
  readonly prefixFallbackToAddresses: boolean;
  /** Secondary addresses one ENI can hold (the type's IPv4 per ENI less the primary). */
  readonly addressSlotsPerEni: number;
}

export interface SubnetChoice {
  readonly subnetId: string;
  readonly cidr: string;
  readonly ipCount: number;
  readonly prefixCount: number;
  /** A prefix request turned into single addresses. */
  readonly fallback: boolean;
}

/**
 * Where an ENI refused for room goes next: the candidate subnet of the instance's AZ with the most free
 * addresses that EC2 has not refused for this kind of request, asking for what it still holds (the ENI's own
 * primary address comes out of it too). A subnet refused for prefixes may still take single addresses, so
 * the fallback only skips subnets refused for addresses. Undefined when no candidate is left.
 */
export function chooseSubnet(input: SubnetChoiceInput): SubnetChoice | undefined {
  const ranked = rankSubnets(input.candidates, input.availabilityZone);
  const closedTo = (prefixes: boolean) =>
    new Set(input.refused.filter((r) => prefixes || !r.forPrefixes).map((r) => r.subnetId));
  const { wanted } = input;
  if (wanted.prefixCount > 0) {
    const closed = closedTo(true);
    for (const s of ranked) {
      if (closed.has(s.subnetId)) continue;
      const prefixCount = Math.min(wanted.prefixCount, Math.floor((s.availableIpCount - 1) / ADDRESSES_PER_PREFIX));
      if (prefixCount > 0) return { subnetId: s.subnetId, cidr: s.cidr, ipCount: 0, prefixCount, fallback: false };
    }
    if (!input.prefixFallbackToAddresses) return undefined;
    const ipCount = Math.min(wanted.prefixCount * ADDRESSES_PER_PREFIX, input.addressSlotsPerEni);
    return addressesIn(ranked, closedTo(false), ipCount, true);
  }
  return addressesIn(ranked, closedTo(false), wanted.ipCount, false);
}

function addressesIn(
  ranked: readonly SubnetCandidate[],
  closed: ReadonlySet<string>,
  wanted: number,
  fallback: boolean,
): SubnetChoice | undefined {
  for (const s of ranked) {
    if (closed.has(s.subnetId)) continue;
    const ipCount = Math.min(wanted, s.availableIpCount - 1);
    if (ipCount > 0) return { subnetId: s.subnetId, cidr: s.cidr, ipCount, prefixCount: 0, fallback };
  }
  return undefined;
}

/**
 * The node item's reason when no candidate subnet can hold a launch's minimum, naming each subnet and what
 * EC2 answered, so `vpc-lease nodes` says plainly why the launch was abandoned.
 */
export function subnetsExhaustedReason(
  refused: readonly RefusedSubnet[],
  possibleLeases: number,
  minLeases: number,
): string {
  const seen = [...new Map(refused.map((r) => [`${r.subnetId} ${r.code}`, r])).values()];
  const list = seen.map((r) => `${r.subnetId} ${r.code}`).join(', ');
  return `subnets-exhausted: every candidate subnet is out of room for the launch's minimum (${possibleLeases} of minLeases ${minLeases} possible); EC2 refused ${list}`;
}

/** Refusals kept on a node item: the latest per subnet and code, so the item stays small. */
const REFUSALS_KEPT = 8;

/** A node item's refusals with `added` merged in: the latest per subnet and code, oldest first, at most 8. */
export function mergeRefusals(
  recorded: readonly SubnetRefusal[] | undefined,
  added: readonly SubnetRefusal[],
): SubnetRefusal[] {
  const latest = new Map<string, SubnetRefusal>();
  for (const r of [...(recorded ?? []), ...added]) latest.set(`${r.subnetId} ${r.code}`, r);
  return [...latest.values()].sort((a, b) => a.atMs - b.atMs).slice(-REFUSALS_KEPT);
}
