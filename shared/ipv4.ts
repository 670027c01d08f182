import { ValidationError } from './errors.js';

/** IPv4 arithmetic on unsigned 32-bit integers; everything the planners and the datapath need. */
export function parseIpv4(text: string): number {
  const parts = text.split('.');
  if (parts.length !== 4) throw new ValidationError(`invalid IPv4 address ${JSON.stringify(text)}`);
  let value = 0;
  for (const part of parts) {
    if (!/^(0|[1-9]\d{0,2})$/.test(part) || Number(part) > 255) {
      throw new ValidationError(`invalid IPv4 address ${JSON.stringify(text)}`);
    }
    value = value * 256 + Number(part);
  }
  return value;
}

export function formatIpv4(value: number): string {
  return [value >>> 24, (value >>> 16) & 255, (value >>> 8) & 255, value & 255].join('.');
}

export function isIpv4(text: string): boolean {
  try {
    parseIpv4(text);
    return true;
  } catch {
    return false;
  }
}

export interface Cidr {
  readonly network: number;
  readonly prefixLength: number;
}

export function parseCidr(text: string): Cidr {
  const [addr, len, extra] = text.split('/');
  const prefixLength = Number(len);
  if (extra !== undefined || addr === undefined || !/^\d{1,2}$/.test(len ?? '') || prefixLength > 32) {
    throw new ValidationError(`invalid CIDR ${JSON.stringify(text)}`);
  }
  const value = parseIpv4(addr);
  const network = prefixLength === 0 ? 0 : (value & (~0 << (32 - prefixLength))) >>> 0;
  if (network !== value) throw new ValidationError(`CIDR ${text} has host bits set`);
  return { network, prefixLength };
}

export function formatCidr(cidr: Cidr): string {
  return `${formatIpv4(cidr.network)}/${cidr.prefixLength}`;
}

export function cidrSize(cidr: Cidr): number {
  return 2 ** (32 - cidr.prefixLength);
}

export function cidrContains(cidr: Cidr, address: number): boolean {
  return address >= cidr.network && address < cidr.network + cidrSize(cidr);
}

/** The VPC router: the subnet's network address + 1 (AWS reserves it in every subnet). */
export function subnetGateway(subnetCidr: string): string {
  return formatIpv4(parseCidr(subnetCidr).network + 1);
}

/** Every address of a CIDR block, e.g. the 16 of a delegated /28. */
export function addressesOf(cidrText: string): string[] {
  const cidr = parseCidr(cidrText);
  return Array.from({ length: cidrSize(cidr) }, (_, i) => formatIpv4(cidr.network + i));
}
