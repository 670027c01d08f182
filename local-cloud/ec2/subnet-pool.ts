import { cidrContains, formatIpv4, parseCidr, parseIpv4 } from '../../shared/ipv4.js';
import { Ec2ApiError } from './errors.js';
import type { SeededRandom } from './random.js';

/** Addresses in one delegated IPv4 prefix (/28), which must be aligned and wholly free. */
const PREFIX_SIZE = 16;

/**
 * Address accounting of one subnet. AWS reserves five addresses in every subnet (network, VPC router, DNS,
 * future use, broadcast); every primary/secondary address and every delegated /28 takes space from it, and an
 * exhausted subnet answers `InsufficientFreeAddressesInSubnet`. Free addresses are chosen at random (seeded),
 * as EC2 does, so callers cannot come to rely on contiguity.
 */
export class SubnetPool {
  readonly network: number;
  readonly size: number;
  private readonly used = new Set<number>();
  private readonly reserved: ReadonlySet<number>;

  constructor(
    readonly cidr: string,
    private readonly random: SeededRandom,
  ) {
    const parsed = parseCidr(cidr);
    this.network = parsed.network;
    this.size = 2 ** (32 - parsed.prefixLength);
    const n = this.network;
    this.reserved = new Set([n, n + 1, n + 2, n + 3, n + this.size - 1]);
  }

  /** What DescribeSubnets reports as AvailableIpAddressCount. */
  available(): number {
    return this.size - this.reserved.size - this.used.size;
  }

  contains(address: string): boolean {
    return cidrContains({ network: this.network, prefixLength: 32 - Math.log2(this.size) }, parseIpv4(address));
  }

  isFree(value: number): boolean {
    return (
      !this.used.has(value) && !this.reserved.has(value) && value >= this.network && value < this.network + this.size
    );
  }

  /** Takes a specific address; throws the EC2 error for out-of-range, reserved or taken. */
  claim(address: string): void {
    const value = parseIpv4(address);
    if (value < this.network || value >= this.network + this.size) {
      throw new Ec2ApiError(
        'InvalidParameterValue',
        `Address ${address} does not fall within the subnet's address range`,
      );
    }
    if (this.reserved.has(value)) {
      throw new Ec2ApiError('InvalidParameterValue', `Address ${address} is reserved by AWS in subnet ${this.cidr}`);
    }
    if (this.used.has(value)) throw new Ec2ApiError('InvalidIPAddress.InUse', `Address ${address} is in use.`);
    this.used.add(value);
  }

  /** Takes `count` free addresses at once, or none (the whole request fails when the subnet is short). */
  claimAny(count: number): string[] {
    if (count > this.available()) throw insufficient();
    const picked: number[] = [];
    for (let i = 0; i < count; i++) {
      const value = this.pickFree();
      this.used.add(value);
      picked.push(value);
    }
    return picked.map(formatIpv4);
  }

  /**
   * Takes `count` aligned, wholly free /28 blocks, or none. Short of addresses altogether the subnet is full
   * (`InsufficientFreeAddressesInSubnet`); with addresses enough but no aligned block left (fragmentation) EC2
   * answers `InsufficientCidrBlocks` instead, and single addresses may still be had.
   */
  claimPrefixes(count: number): string[] {
    const candidates = this.freeBlocks();
    if (candidates.length < count) {
      throw this.available() < count * PREFIX_SIZE ? insufficient() : insufficientCidrBlocks();
    }
    const out: string[] = [];
    for (let i = 0; i < count; i++) {
      const [base] = candidates.splice(this.random.int(candidates.length), 1) as [number];
      for (let a = base; a < base + PREFIX_SIZE; a++) this.used.add(a);
      out.push(`${formatIpv4(base)}/28`);
    }
    return out;
  }

  claimPrefix(prefix: string): void {
    const cidr = parseCidr(prefix);
    if (cidr.prefixLength !== 28) throw new Ec2ApiError('InvalidParameterValue', `Prefix ${prefix} is not a /28`);
    if (cidr.network < this.network || cidr.network + PREFIX_SIZE > this.network + this.size) {
      throw new Ec2ApiError(
        'InvalidParameterValue',
        `Prefix ${prefix} does not fall within the subnet's address range`,
      );
    }
    if (!this.blockFree(cidr.network)) throw new Ec2ApiError('InvalidIPAddress.InUse', `Prefix ${prefix} is in use.`);
    for (let a = cidr.network; a < cidr.network + PREFIX_SIZE; a++) this.used.add(a);
  }

  release(address: string): void {
    this.used.delete(parseIpv4(address));
  }

  releasePrefix(prefix: string): void {
    const { network } = parseCidr(prefix);
    for (let a = network; a < network + PREFIX_SIZE; a++) this.used.delete(a);
  }

  /** Bases of the aligned /28 blocks with no address used or reserved: what a prefix request can get. */
  freeBlocks(): number[] {
    const bases: number[] = [];
    for (let base = this.network; base + PREFIX_SIZE <= this.network + this.size; base += PREFIX_SIZE) {
      if (this.blockFree(base)) bases.push(base);
    }
    return bases;
  }

  private blockFree(base: number): boolean {
    for (let a = base; a < base + PREFIX_SIZE; a++) if (!this.isFree(a)) return false;
    return true;
  }

  private pickFree(): number {
    // Random probes first (cheap while the subnet is mostly free), then a scan from a random start.
    for (let i = 0; i < 32; i++) {
      const value = this.network + this.random.int(this.size);
      if (this.isFree(value)) return value;
    }
    const start = this.random.int(this.size);
    for (let i = 0; i < this.size; i++) {
      const value = this.network + ((start + i) % this.size);
      if (this.isFree(value)) return value;
    }
    throw new Error('subnet accounting out of step: no free address although available() > 0');
  }
}

/** EC2's words (HTTP 400; the message names no subnet), as amazon-vpc-cni-k8s logs quote them (#1773, #1836). */
export function insufficient(): Ec2ApiError {
  return new Ec2ApiError(
    'InsufficientFreeAddressesInSubnet',
    'The specified subnet does not have enough free addresses to satisfy the request.',
  );
}

export function insufficientCidrBlocks(): Ec2ApiError {
  return new Ec2ApiError(
    'InsufficientCidrBlocks',
    'The specified subnet does not have enough free cidr blocks to satisfy the request.',
  );
}
