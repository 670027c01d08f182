/**
 * The fabric's assignment table: which ENI (MAC, device index, subnet) owns which VPC addresses, on which node —
 * the same data the EC2 simulator holds after AssignPrivateIpAddresses, generated here so the VM needs no
 * simulator. The fabric delivers and accepts only by this table; the lease seeds for the plugin come from it too.
 */
export interface Subnet {
  readonly id: string;
  readonly cidr: string;
  readonly prefixLength: number;
  /** The VPC router: network address + 1. */
  readonly gateway: string;
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
}

export interface FabricNode {
  readonly name: string;
  readonly instanceId: string;
  readonly bootIp: string;
  readonly enis: readonly Eni[];
}

export const VPC_CIDR = '10.77.0.0/16';
export const SUBNET_BOOT: Subnet = {
  id: 'subnet-0077aa00',
  cidr: '10.77.0.0/24',
  prefixLength: 24,
  gateway: '10.77.0.1',
};
export const SUBNET_POD: Subnet = {
  id: 'subnet-0077bb01',
  cidr: '10.77.1.0/24',
  prefixLength: 24,
  gateway: '10.77.1.1',
};
export const SERVICE_CIDR = '10.96.0.0/16';
export const IMDS_IP = '169.254.169.254';
export const VPC_MTU = 9001;
/** The NAT gateway's side of the VPC and its public side; the internet's path MTU is 1500. */
export const NAT_INSIDE = { fabric: '100.64.0.1', nat: '100.64.0.2', prefixLength: 30, mtu: 1500 };
export const NAT_OUTSIDE = { nat: '203.0.113.1', outside: '203.0.113.10', prefixLength: 24, mtu: VPC_MTU };
/** Configured on a node but owned by no ENI: a bridge would deliver to it, the VPC must not. */
export const TRAP_IP = '10.77.0.250';
export const UNASSIGNED_SOURCE = '10.77.0.251';

export type SubnetKind = 'boot' | 'pod';

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
      };
    };
    return {
      name,
      instanceId: `i-0fab${(n + 1).toString().padStart(13, '0')}`,
      bootIp,
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

/** Who owns an address, by the table. */
export function ownerOf(nodes: readonly FabricNode[], ip: string): Eni | undefined {
  return nodes.flatMap((n) => n.enis).find((e) => e.ips.includes(ip));
}
