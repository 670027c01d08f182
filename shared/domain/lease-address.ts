import { cidrContains, parseCidr, parseIpv4 } from '../ipv4.js';
import { canonicalIpv6, ipFamilyOf, ipv6Within } from '../ipv6.js';

/** What EC2 reports an ENI holds, in both families (the IPv6 members absent on IPv4-only ENIs). */
export interface EniAddresses {
  readonly secondaryIps: readonly string[];
  readonly prefixes: readonly string[];
  readonly ipv6Addresses?: readonly string[];
  readonly ipv6Prefixes?: readonly string[];
}

/**
 * Whether a lease's address is assigned to the ENI in EC2 (invariant 2): a secondary address or inside a /28
 * for IPv4; an assigned address or inside a delegated /80 for IPv6, compared in canonical form. A malformed
 * address is assigned nowhere.
 */
export function addressOnEni(eni: EniAddresses, ip: string): boolean {
  try {
    if (ipFamilyOf(ip) === 'ipv4') {
      const value = parseIpv4(ip);
      return eni.secondaryIps.includes(ip) || eni.prefixes.some((p) => cidrContains(parseCidr(p), value));
    }
    const canonical = canonicalIpv6(ip);
    return (
      (eni.ipv6Addresses ?? []).some((a) => canonicalIpv6(a) === canonical) ||
      (eni.ipv6Prefixes ?? []).some((p) => ipv6Within(p, canonical))
    );
  } catch {
    return false;
  }
}

/** Whether `ip` lies in `prefix`, a /28 or an IPv6 /80 (an address of the other family is in neither). */
export function addressInPrefix(prefix: string, ip: string): boolean {
  return addressOnEni({ secondaryIps: [], prefixes: [prefix], ipv6Prefixes: [prefix] }, ip);
}
