import type { NewLease } from '../domain/lease.js';
import type { EniRecord, NodeRecord } from '../domain/node.js';
import { addressesOf, subnetGateway } from '../ipv4.js';

/**
 * EniRecord plus what was asked of EC2, so a resumed launch re-sends the very same request (same ClientToken,
 * same parameters) without recomputing a plan whose inputs (free addresses) have moved since. The lease
 * store writes `enis` as a whole map, so these fields survive a round trip.
 * (Proposed for shared/domain/node.ts.)
 */
export interface PodEniRecord extends EniRecord {
  readonly plannedIpCount: number;
  readonly plannedPrefixCount: number;
}

export function asPodEni(eni: EniRecord): PodEniRecord {
  const e = eni as Partial<PodEniRecord> & EniRecord;
  return { ...eni, plannedIpCount: e.plannedIpCount ?? 0, plannedPrefixCount: e.plannedPrefixCount ?? 0 };
}

/** ENIs whose addresses are in EC2 and whose attachment is complete: their leases may exist. */
const LEASABLE = new Set(['ATTACHED', 'LEASED']);

/**
 * The leases a node's ENIs carry: one per secondary address, or one per address of each /28 in prefix mode,
 * in device-index order and capped at `leaseCap` (a /28 is all or nothing in EC2, the cap is not).
 */
export function expectedLeases(node: NodeRecord, leaseCap: number): NewLease[] {
  const out: NewLease[] = [];
  const enis = [...node.enis].filter((e) => LEASABLE.has(e.step)).sort((a, b) => a.deviceIndex - b.deviceIndex);
  for (const eni of enis) {
    if (!eni.eniId || !eni.mac || !eni.subnetCidr) continue;
    const placement = {
      instanceArn: node.instanceArn,
      eniId: eni.eniId,
      deviceIndex: eni.deviceIndex,
      mac: eni.mac,
      subnetId: eni.subnetId,
      subnetCidr: eni.subnetCidr,
      gateway: subnetGateway(eni.subnetCidr),
    };
    for (const ip of eni.addresses) out.push({ ...placement, ip });
    for (const prefix of eni.prefixes) for (const ip of addressesOf(prefix)) out.push({ ...placement, ip, prefix });
  }
  return out.slice(0, leaseCap);
}
