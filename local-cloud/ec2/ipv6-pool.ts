import { canonicalIpv6, formatIpv6, formatIpv6Cidr, isIpv6, parseIpv6, parseIpv6Cidr } from '../../shared/ipv6.js';
import { Ec2ApiError } from './errors.js';
import type { SeededRandom } from './random.js';

/** A delegated IPv6 prefix is a /80: 65,536 of them fit a subnet's /64. */
export const IPV6_PREFIX_LENGTH = 80;
const PREFIX_SHIFT = 48n;
const PREFIXES_PER_SUBNET = 1 << 16;

/**
 * Address accounting of one subnet's IPv6 /64. AWS reserves the first four addresses and the last one, as in
 * IPv4; every assigned address and every delegated /80 is taken, and an address may not fall inside a
 * delegated /80 (nor a /80 hold an assigned address). A /64 never runs out in practice, so the rules that
 * bite are the per-ENI ones, not this pool's size. Choice is random (seeded), as EC2's is.
 */
export class Ipv6SubnetPool {
  readonly network: bigint;
  private readonly addresses = new Set<bigint>();
  /** Indexes of the delegated /80s inside the /64. */
  private readonly prefixes = new Set<number>();

  constructor(
    readonly cidr: string,
    private readonly random: SeededRandom,
  ) {
    const parsed = parseIpv6Cidr(cidr);
    if (parsed.prefixLength !== 64) throw new Ec2ApiError('InvalidSubnet.Range', `The CIDR '${cidr}' is invalid.`);
    this.network = parsed.network;
  }

  private reserved(value: bigint): boolean {
    const offset = value - this.network;
    return offset < 4n || offset === (1n << 64n) - 1n;
  }

  private inSubnet(value: bigint): boolean {
    return value >= this.network && value < this.network + (1n << 64n);
  }

  private prefixIndexOf(value: bigint): number {
    return Number((value - this.network) >> PREFIX_SHIFT);
  }

  private free(value: bigint): boolean {
    return !this.reserved(value) && !this.addresses.has(value) && !this.prefixes.has(this.prefixIndexOf(value));
  }

  /** A /80 is free when no assigned or reserved address lies inside it and it is not delegated already. */
  private prefixFree(index: number): boolean {
    if (this.prefixes.has(index) || index === 0 || index === PREFIXES_PER_SUBNET - 1) return false;
    for (const a of this.addresses) if (this.prefixIndexOf(a) === index) return false;
    return true;
  }

  /** Takes a specific address; the EC2 error for malformed, out-of-range, reserved or taken. */
  claim(address: string): string {
    if (!isIpv6(address)) {
      throw new Ec2ApiError('InvalidParameterValue', `Invalid IPv6 address ${JSON.stringify(address)}.`);
    }
    const value = parseIpv6(address);
    if (!this.inSubnet(value)) {
      throw new Ec2ApiError(
        'InvalidParameterValue',
        `Address ${address} does not fall within the subnet's IPv6 range ${this.cidr}`,
      );
    }
    if (this.reserved(value)) {
      throw new Ec2ApiError('InvalidParameterValue', `Address ${address} is reserved by AWS in subnet ${this.cidr}`);
    }
    if (!this.free(value)) throw new Ec2ApiError('InvalidIPAddress.InUse', `Address ${address} is in use.`);
    this.addresses.add(value);
    return formatIpv6(value);
  }

  claimAny(count: number): string[] {
    const out: string[] = [];
    for (let i = 0; i < count; i++) {
      let value: bigint;
      do {
        // 64 random bits: a collision with something taken is vanishingly rare, so retrying is cheap.
        const high = BigInt(this.random.int(2 ** 32));
        const low = BigInt(this.random.int(2 ** 32));
        value = this.network + ((high << 32n) | low);
      } while (!this.free(value));
      this.addresses.add(value);
      out.push(formatIpv6(value));
    }
    return out;
  }

  claimPrefix(prefix: string): string {
    let cidr: ReturnType<typeof parseIpv6Cidr>;
    try {
      cidr = parseIpv6Cidr(prefix);
    } catch {
      throw new Ec2ApiError('InvalidParameterValue', `Invalid IPv6 prefix ${JSON.stringify(prefix)}.`);
    }
    if (cidr.prefixLength !== IPV6_PREFIX_LENGTH) {
      throw new Ec2ApiError('InvalidParameterValue', `Prefix ${prefix} is not a /${IPV6_PREFIX_LENGTH}`);
    }
    if (!this.inSubnet(cidr.network)) {
      throw new Ec2ApiError(
        'InvalidParameterValue',
        `Prefix ${prefix} does not fall within the subnet's IPv6 range ${this.cidr}`,
      );
    }
    const index = this.prefixIndexOf(cidr.network);
    if (!this.prefixFree(index)) throw new Ec2ApiError('InvalidIPAddress.InUse', `Prefix ${prefix} is in use.`);
    this.prefixes.add(index);
    return this.prefixText(index);
  }

  claimPrefixes(count: number): string[] {
    const out: string[] = [];
    for (let i = 0; i < count; i++) {
      const start = this.random.int(PREFIXES_PER_SUBNET);
      let index = -1;
      for (let k = 0; k < PREFIXES_PER_SUBNET && index < 0; k++) {
        const candidate = (start + k) % PREFIXES_PER_SUBNET;
        if (this.prefixFree(candidate)) index = candidate;
      }
      if (index < 0) {
        for (const p of out) this.releasePrefix(p);
        throw new Ec2ApiError(
          'InsufficientCidrBlocks',
          'The specified subnet does not have enough free cidr blocks to satisfy the request.',
        );
      }
      this.prefixes.add(index);
      out.push(this.prefixText(index));
    }
    return out;
  }

  release(address: string): void {
    this.addresses.delete(parseIpv6(address));
  }

  releasePrefix(prefix: string): void {
    this.prefixes.delete(this.prefixIndexOf(parseIpv6Cidr(prefix).network));
  }

  /** Count of delegated /80s and assigned addresses, for tests of the all-or-nothing rule. */
  usage(): { addresses: number; prefixes: number } {
    return { addresses: this.addresses.size, prefixes: this.prefixes.size };
  }

  private prefixText(index: number): string {
    return formatIpv6Cidr({
      network: this.network + (BigInt(index) << PREFIX_SHIFT),
      prefixLength: IPV6_PREFIX_LENGTH,
    });
  }
}

/** Canonical form of an address the client sent, or the EC2 error for a malformed one. */
export function clientIpv6(text: string): string {
  try {
    return canonicalIpv6(text);
  } catch {
    throw new Ec2ApiError('InvalidParameterValue', `Invalid IPv6 address ${JSON.stringify(text)}.`);
  }
}

export function clientIpv6Prefix(text: string): string {
  try {
    return formatIpv6Cidr(parseIpv6Cidr(text));
  } catch {
    throw new Ec2ApiError('InvalidParameterValue', `Invalid IPv6 prefix ${JSON.stringify(text)}.`);
  }
}
