/**
 * The fabric's assignment table: which ENI (MAC, device index, subnet) owns which VPC addresses, on which node —
 * the same data the EC2 simulator holds after AssignPrivateIpAddresses, generated here so the VM needs no
 * simulator. The fabric delivers and accepts only by this table; the lease seeds for the plugin come from it too.
 */

import { parseIpv4 } from '../../shared/ipv4.js';
import { ipv6Within, nthAddress, nthSubPrefix } from '../../shared/ipv6.js';
import type { PodFamily, SubnetKind } from './configs.js';

export type { SubnetKind };

export interface Subnet {
  readonly id: string;
  readonly cidr: string;
  readonly prefixLength: number;
  /** The VPC router: network address + 1. */
  readonly gateway: string;
  /** The subnet's IPv6 /64 and its router, the /64's base + 1 (see the fabric README on that address). */
  readonly cidr6: string;
  readonly gateway6: string;
}

export interface Eni {
  readonly id: string;
  readonly node: string;
  readonly deviceIndex: number;
  /** The interface name on the node (what the instance's udev would call it). */
  readonly ifName: string;
  readonly mac: string;
  readonly subnet: Subnet;
  /** Primary first, then the secondary addresses the pool assigned (the leases). */
  readonly ips: readonly string[];
  /** The fabric's end of this ENI's link. */
  readonly port: string;
  /** The boot ENI: the node's IPv6 address. A pod ENI: none (its IPv6 addresses are its /80's). */
  readonly ips6: readonly string[];
  /** A pod ENI's delegated IPv6 /80 (Ipv6PrefixCount 1): every address in it is the ENI's. */
  readonly prefix6?: string;
}

export interface FabricNode {
  readonly name: string;
  readonly instanceId: string;
  readonly bootIp: string;
  readonly bootIp6: string;
  readonly enis: readonly Eni[];
}

export const VPC_CIDR = '10.77.0.0/16';
export const VPC_CIDR6 = '2600:1f18:77::/56';
export const SUBNET_BOOT: Subnet = {
  id: 'subnet-0077aa00',
  cidr: '10.77.0.0/24',
  prefixLength: 24,
  gateway: '10.77.0.1',
  cidr6: '2600:1f18:77::/64',
  gateway6: '2600:1f18:77::1',
};
export const SUBNET_POD: Subnet = {
  id: 'subnet-0077bb01',
  cidr: '10.77.1.0/24',
  prefixLength: 24,
  gateway: '10.77.1.1',
  cidr6: '2600:1f18:77:1::/64',
  gateway6: '2600:1f18:77:1::1',
};
export const SERVICE_CIDR = '10.96.0.0/16';
export const SERVICE_CIDR6 = 'fd00:96::/108';
export const IMDS_IP = '169.254.169.254';
/** Nitro's IMDS on IPv6. */
export const IMDS_IP6 = 'fd00:ec2::254';
export const VPC_MTU = 9001;
/** The NAT gateway's side of the VPC and its public side; the internet's path MTU is 1500. */
export const NAT_INSIDE = { fabric: '100.64.0.1', nat: '100.64.0.2', prefixLength: 30, mtu: 1500 };
export const NAT_OUTSIDE = { nat: '203.0.113.1', outside: '203.0.113.10', prefixLength: 24, mtu: VPC_MTU };
/** The same hops in IPv6: the namespace that is the NAT gateway is the egress-only internet gateway too. */
export const NAT_INSIDE6 = { fabric: 'fd00:64::1', nat: 'fd00:64::2', prefixLength: 64 };
export const NAT_OUTSIDE6 = { nat: '2001:db8:203::1', outside: '2001:db8:203::10', prefixLength: 64 };
/** Configured on a node but owned by no ENI: a bridge would deliver to it, the VPC must not. */
export const TRAP_IP = '10.77.0.250';
export const UNASSIGNED_SOURCE = '10.77.0.251';
/** In the boot subnet's /64, outside every ENI's /80 and address. */
export const TRAP_IP6 = '2600:1f18:77::fa';
export const UNASSIGNED_SOURCE6 = '2600:1f18:77::fb';

function ipIn(subnet: Subnet, host: number): string {
  return `${subnet.cidr.split('.').slice(0, 3).join('.')}.${host}`;
}

/**
 * Two nodes; each has its boot ENI (device 0) and two pod ENIs in the boot subnet (devices 1, 2) and two in the
 * pod subnet (devices 3, 4). Every pod ENI holds a primary address and four secondaries.
 */
export function buildTopology(nodeCount = 2): FabricNode[] {
  return Array.from({ length: nodeCount }, (_, n) => {
    const name = `node${n + 1}`;
    const mac = (device: number): string => `02:00:00:00:${(n + 1).toString(16).padStart(2, '0')}:0${device}`;
    const bootIp = ipIn(SUBNET_BOOT, 5 + n);
    const bootIp6 = nthAddress(SUBNET_BOOT.cidr6, 5 + n);
    const podEni = (device: number, subnet: Subnet, slot: number): Eni => {
      const base = 16 + n * 32 + slot * 8;
      return {
        id: `eni-0fab00${n + 1}${device}`,
        node: name,
        deviceIndex: device,
        ifName: `eth${device}`,
        mac: mac(device),
        subnet,
        ips: [ipIn(subnet, base + 7), ...[0, 1, 2, 3].map((i) => ipIn(subnet, base + i))],
        port: `f${n + 1}e${device}`,
        ips6: [],
        prefix6: nthSubPrefix(subnet.cidr6, 80, (n + 1) * 16 + device),
      };
    };
    return {
      name,
      instanceId: `i-0fab${(n + 1).toString().padStart(13, '0')}`,
      bootIp,
      bootIp6,
      enis: [
        {
          id: `eni-0fab00${n + 1}0`,
          node: name,
          deviceIndex: 0,
          ifName: 'eth0',
          mac: mac(0),
          subnet: SUBNET_BOOT,
          ips: [bootIp],
          port: `f${n + 1}e0`,
          ips6: [bootIp6],
        },
        podEni(1, SUBNET_BOOT, 0),
        podEni(2, SUBNET_BOOT, 1),
        podEni(3, SUBNET_POD, 0),
        podEni(4, SUBNET_POD, 1),
      ],
    };
  });
}

/** The pod ENIs of one subnet kind on a node. */
export function podEnis(node: FabricNode, kind: SubnetKind): Eni[] {
  const subnet = kind === 'boot' ? SUBNET_BOOT : SUBNET_POD;
  return node.enis.filter((e) => e.deviceIndex > 0 && e.subnet.id === subnet.id);
}

/** Who owns an address, by the table (an IPv6 address in an ENI's /80 is that ENI's). */
export function ownerOf(nodes: readonly FabricNode[], ip: string): Eni | undefined {
  return nodes
    .flatMap((n) => n.enis)
    .find((e) => e.ips.includes(ip) || e.ips6.includes(ip) || (e.prefix6 !== undefined && inPrefix(e.prefix6, ip)));
}

function inPrefix(prefix: string, ip: string): boolean {
  return ip.includes(':') && ipv6Within(prefix, ip);
}

/** The IPv6 address of a pod ENI for lease slot `slot` (0…3) of an `ipv6` pod: the /80's base + slot + 1. */
export function ipv6Slot(eni: Eni, slot: number): string {
  return nthAddress(eni.prefix6!, slot + 1);
}

/** A `dual` pod's IPv6 partner of an IPv4 address: the /80's base plus the IPv4 address as a number. */
export function dualPartner(eni: Eni, ipv4: string): string {
  return nthAddress(eni.prefix6!, BigInt(parseIpv4(ipv4) >>> 0));
}

/** The addresses a pod ENI hands out in lease slot `slot` (0…3) for a pod family: one, or two for `dual`. */
export function slotAddresses(eni: Eni, slot: number, family: PodFamily): string[] {
  const v4 = eni.ips[slot + 1]!;
  if (family === 'ipv4') return [v4];
  if (family === 'ipv6') return [ipv6Slot(eni, slot)];
  return [v4, dualPartner(eni, v4)];
}

/** Every IPv6 address a pod of either IPv6 family may hold on an ENI (the fabric answers neighbour discovery for them). */
export function candidateIps6(eni: Eni): string[] {
  if (!eni.prefix6) return [...eni.ips6];
  return [0, 1, 2, 3].flatMap((slot) => [ipv6Slot(eni, slot), dualPartner(eni, eni.ips[slot + 1]!)]);
}
