import { ADDRESSES_PER_PREFIX } from '../domain/limits.js';
import { addressesOf, parseCidr, parseIpv4 } from '../ipv4.js';

/** What an ENI takes from its subnet, as DescribeNetworkInterfaces reports it. */
export interface SubnetTenant {
  readonly primaryIp: string;
  readonly secondaryIps: readonly string[];
  readonly prefixes: readonly string[];
}

/**
 * Aligned /28 blocks of `cidr` that hold no used address: how many prefixes EC2 could still delegate. Used
 * are AWS's five reserved addresses (the first four and the last) and every address and prefix of the ENIs
 * in the subnet. EC2 does not report this figure (DescribeSubnets gives free addresses only), and a subnet
 * CIDR reservation is not visible to DescribeNetworkInterfaces, so a reserved range counts as free here.
 */
export function freePrefixBlocks(cidr: string, tenants: readonly SubnetTenant[]): number {
  const { network, prefixLength } = parseCidr(cidr);
  const size = 2 ** (32 - prefixLength);
  const used = new Set([network, network + 1, network + 2, network + 3, network + size - 1]);
  for (const t of tenants) {
    for (const ip of [t.primaryIp, ...t.secondaryIps]) used.add(parseIpv4(ip));
    for (const prefix of t.prefixes) for (const ip of addressesOf(prefix)) used.add(parseIpv4(ip));
  }
  let free = 0;
  for (let base = network; base + ADDRESSES_PER_PREFIX <= network + size; base += ADDRESSES_PER_PREFIX) {
    let clear = true;
    for (let a = base; a < base + ADDRESSES_PER_PREFIX && clear; a += 1) clear = !used.has(a);
    if (clear) free += 1;
  }
  return free;
}
