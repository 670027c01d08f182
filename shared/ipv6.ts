import { ValidationError } from './errors.js';
import { isIpv4, parseIpv4 } from './ipv4.js';

/**
 * IPv6 arithmetic on unsigned 128-bit bigints, beside shared/ipv4.ts. Every address this project stores or
 * compares is in RFC 5952 canonical form (what the kernel and `new URL('http://[..]').hostname` print), so
 * two spellings of one address never make two lease items.
 */
const BITS = 128n;
const MAX = (1n << BITS) - 1n;

export type IpFamily = 'ipv4' | 'ipv6';

function invalid(text: string): ValidationError {
  return new ValidationError(`invalid IPv6 address ${JSON.stringify(text)}`);
}

function parseGroups(part: string, text: string): number[] {
  if (part === '') return [];
  return part.split(':').map((group) => {
    if (!/^[0-9a-fA-F]{1,4}$/.test(group)) throw invalid(text);
    return Number.parseInt(group, 16);
  });
}

export function parseIpv6(text: string): bigint {
  let body = text;
  // An embedded dotted quad (::ffff:10.0.0.1) spells the last two groups.
  const lastColon = body.lastIndexOf(':');
  if (lastColon >= 0 && body.slice(lastColon + 1).includes('.')) {
    const quad = body.slice(lastColon + 1);
    if (!isIpv4(quad)) throw invalid(text);
    const v4 = parseIpv4(quad);
    body = `${body.slice(0, lastColon + 1)}${(v4 >>> 16).toString(16)}:${(v4 & 0xffff).toString(16)}`;
  }
  const halves = body.split('::');
  if (halves.length > 2) throw invalid(text);
  const head = parseGroups(halves[0] ?? '', text);
  const rest = halves.length === 2 ? parseGroups(halves[1] ?? '', text) : [];
  const given = head.length + rest.length;
  let groups: number[];
  if (halves.length === 2) {
    if (given > 7) throw invalid(text);
    groups = [...head, ...new Array<number>(8 - given).fill(0), ...rest];
  } else {
    if (given !== 8) throw invalid(text);
    groups = head;
  }
  return groups.reduce((value, group) => (value << 16n) | BigInt(group), 0n);
}

/** RFC 5952: lower case, no leading zeros, the longest run (≥ 2) of zero groups as "::", the first on a tie. */
export function formatIpv6(value: bigint): string {
  if (value < 0n || value > MAX) throw new ValidationError(`IPv6 value out of range: ${value}`);
  const groups = Array.from({ length: 8 }, (_, i) => Number((value >> BigInt(112 - 16 * i)) & 0xffffn));
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i += 1;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j += 1;
    if (j - i > bestLength) [bestStart, bestLength] = [i, j - i];
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart < 0) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLength).join(':')}`;
}

export function isIpv6(text: string): boolean {
  try {
    parseIpv6(text);
    return true;
  } catch {
    return false;
  }
}

/** The one spelling of an address that lease keys and comparisons use. */
export function canonicalIpv6(text: string): string {
  return formatIpv6(parseIpv6(text));
}

/** The family of an address as written: a lease's family is read from its sort key, not stored beside it. */
export function ipFamilyOf(ip: string): IpFamily {
  if (isIpv4(ip)) return 'ipv4';
  if (isIpv6(ip)) return 'ipv6';
  throw new ValidationError(`invalid IP address ${JSON.stringify(ip)}`);
}

export interface Ipv6Cidr {
  readonly network: bigint;
  readonly prefixLength: number;
}

export function parseIpv6Cidr(text: string): Ipv6Cidr {
  const [addr, len, extra] = text.split('/');
  const prefixLength = Number(len);
  if (extra !== undefined || addr === undefined || !/^\d{1,3}$/.test(len ?? '') || prefixLength > 128) {
    throw new ValidationError(`invalid IPv6 CIDR ${JSON.stringify(text)}`);
  }
  const value = parseIpv6(addr);
  const network = value & ~(MAX >> BigInt(prefixLength)) & MAX;
  if (network !== value) throw new ValidationError(`IPv6 CIDR ${text} has host bits set`);
  return { network, prefixLength };
}

export function formatIpv6Cidr(cidr: Ipv6Cidr): string {
  return `${formatIpv6(cidr.network)}/${cidr.prefixLength}`;
}

export function ipv6CidrSize(cidr: Ipv6Cidr): bigint {
  return 1n << (BITS - BigInt(cidr.prefixLength));
}

export function ipv6CidrContains(cidr: Ipv6Cidr, address: bigint): boolean {
  return address >= cidr.network && address < cidr.network + ipv6CidrSize(cidr);
}

/** Whether `inner` (a CIDR or, with /128 implied, an address) lies wholly inside `outer`; both as text. */
export function ipv6Within(outer: string, inner: string): boolean {
  const o = parseIpv6Cidr(outer);
  const i = inner.includes('/') ? parseIpv6Cidr(inner) : { network: parseIpv6(inner), prefixLength: 128 };
  return i.prefixLength >= o.prefixLength && ipv6CidrContains(o, i.network);
}

/** The n-th sub-prefix of length `length` inside `parent`, e.g. the n-th /80 of a subnet's /64. */
export function nthSubPrefix(parent: string, length: number, n: bigint | number): string {
  const p = parseIpv6Cidr(parent);
  if (!Number.isInteger(length) || length < p.prefixLength || length > 128) {
    throw new ValidationError(`a /${length} does not fit inside ${parent}`);
  }
  const index = BigInt(n);
  const count = 1n << BigInt(length - p.prefixLength);
  if (index < 0n || index >= count) throw new ValidationError(`${parent} has no /${length} number ${index}`);
  return formatIpv6Cidr({ network: p.network + (index << (BITS - BigInt(length))), prefixLength: length });
}

/** The n-th address of a prefix (0 = its base), canonical. */
export function nthAddress(prefix: string, n: bigint | number): string {
  const p = parseIpv6Cidr(prefix);
  const index = BigInt(n);
  if (index < 0n || index >= ipv6CidrSize(p)) throw new ValidationError(`${prefix} has no address number ${index}`);
  return formatIpv6(p.network + index);
}

/**
 * The VPC router of an IPv6 subnet: the /64's base + 1, as IPv4's network + 1 ("Reserved by AWS for the VPC
 * router", docs.aws.amazon.com/vpc/latest/userguide/subnet-sizing.html); the router also answers at fe80:ec2::1.
 */
export function ipv6SubnetGateway(subnetCidr: string): string {
  return nthAddress(subnetCidr, 1);
}
