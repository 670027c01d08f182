import type { NewLease } from '../domain/lease.js';
import type { EniRecord, NodeRecord } from '../domain/node.js';
import { addressesOf, parseIpv4, subnetGateway } from '../ipv4.js';
import { ipv6SubnetGateway, nthAddress } from '../ipv6.js';

/** ENIs whose addresses are in EC2 and whose attachment is complete: their leases may exist. */
const LEASABLE = new Set(['ATTACHED', 'LEASED']);

function placementOf(node: Pick<NodeRecord, 'instanceArn'>, eni: EniRecord, subnetCidr: string, gateway: string) {
  return {
    instanceArn: node.instanceArn,
    eniId: eni.eniId!,
    deviceIndex: eni.deviceIndex,
    mac: eni.mac!,
    subnetId: eni.subnetId,
    subnetCidr,
    gateway,
  };
}

/**
 * The IPv4 leases an ENI record's addresses make: one per secondary address, one per address of each /28 — or
 * of just `ips`/`prefixes` (a top-up's newly assigned ones). None until the ENI's id, MAC and subnet are known.
 */
export function eniLeases(
  node: Pick<NodeRecord, 'instanceArn'>,
  eni: EniRecord,
  ips: readonly string[] = eni.addresses,
  prefixes: readonly string[] = eni.prefixes,
): NewLease[] {
  if (!eni.eniId || !eni.mac || !eni.subnetCidr) return [];
  const placement = placementOf(node, eni, eni.subnetCidr, subnetGateway(eni.subnetCidr));
  const out: NewLease[] = ips.map((ip) => ({ ...placement, ip }));
  for (const prefix of prefixes) for (const ip of addressesOf(prefix)) out.push({ ...placement, ip, prefix });
  return out;
}

/** An IPv6 lease inside the ENI's /80 (number `n` of it), or none until the /80 and the subnet's CIDR are known. */
function ipv6Lease(node: Pick<NodeRecord, 'instanceArn'>, eni: EniRecord, n: bigint): NewLease | undefined {
  const prefix = eni.ipv6Prefixes?.[0];
  if (!eni.eniId || !eni.mac || !eni.ipv6SubnetCidr || !prefix) return undefined;
  const placement = placementOf(node, eni, eni.ipv6SubnetCidr, ipv6SubnetGateway(eni.ipv6SubnetCidr));
  return { ...placement, ip: nthAddress(prefix, n), prefix };
}

/**
 * A `dual` pod's IPv6 partner of an IPv4 lease: the /80's base plus the IPv4 address as a number. A pure
 * function of the pair, so a redelivered launch, a pool adoption and the invariant checker all name the same
 * addresses, and an operator reads the IPv4 address in the low 32 bits.
 */
export function dualPartner(node: Pick<NodeRecord, 'instanceArn'>, eni: EniRecord, ipv4: string): NewLease | undefined {
  return ipv6Lease(node, eni, BigInt(parseIpv4(ipv4) >>> 0));
}

/**
 * The leases a node's ENIs carry, in device-index order and capped at `leaseCap` pods (a /28 is all or nothing
 * in EC2, the cap is not). `ipv6`: addresses 1…cap of the first /80s; `dual`: the capped IPv4 leases, each with
 * its IPv6 partner on the same ENI (what claim-pair.ts claims together). Launch, pool adoption and the
 * invariant checker all read the node item through this.
 */
export function expectedLeases(node: NodeRecord, leaseCap: number): NewLease[] {
  const enis = [...node.enis].filter((e) => LEASABLE.has(e.step)).sort((a, b) => a.deviceIndex - b.deviceIndex);
  const family = node.ipFamily ?? 'ipv4';
  if (family === 'ipv6') {
    const out: NewLease[] = [];
    for (const eni of enis)
      for (let n = 1n; out.length < leaseCap; n += 1n) {
        const lease = ipv6Lease(node, eni, n);
        if (!lease) break;
        out.push(lease);
      }
    return out;
  }
  const v4 = enis.flatMap((eni) => eniLeases(node, eni)).slice(0, leaseCap);
  if (family === 'ipv4') return v4;
  const byEni = new Map(enis.map((e) => [e.eniId, e]));
  return [...v4, ...v4.flatMap((l) => dualPartner(node, byEni.get(l.eniId)!, l.ip) ?? [])];
}
