import type { NewLease } from '../domain/lease.js';
import type { EniRecord, NodeRecord } from '../domain/node.js';
import { addressesOf, subnetGateway } from '../ipv4.js';

/** ENIs whose addresses are in EC2 and whose attachment is complete: their leases may exist. */
const LEASABLE = new Set(['ATTACHED', 'LEASED']);

/**
 * The leases an ENI record's addresses make: one per secondary address, one per address of each /28 — or of
 * just `ips`/`prefixes` (a top-up's newly assigned ones). None until the ENI's id, MAC and subnet are known.
 */
export function eniLeases(
  node: Pick<NodeRecord, 'instanceArn'>,
  eni: EniRecord,
  ips: readonly string[] = eni.addresses,
  prefixes: readonly string[] = eni.prefixes,
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
  const out: NewLease[] = ips.map((ip) => ({ ...placement, ip }));
  for (const prefix of prefixes) for (const ip of addressesOf(prefix)) out.push({ ...placement, ip, prefix });
  return out;
}

/**
 * The leases a node's ENIs carry, in device-index order and capped at `leaseCap` (a /28 is all or nothing in
 * EC2, the cap is not). Launch, pool adoption and the invariant checker all read the node item through this.
 */
export function expectedLeases(node: NodeRecord, leaseCap: number): NewLease[] {
  const enis = [...node.enis].filter((e) => LEASABLE.has(e.step)).sort((a, b) => a.deviceIndex - b.deviceIndex);
  return enis.flatMap((eni) => eniLeases(node, eni)).slice(0, leaseCap);
}
