/**
 * The fabric's IPv6 half, built beside the IPv4 one (net.ts) and by the same rules:
 * - delivery only to the owner: a node's IPv6 address by a /128 route, a pod ENI's /80 (every address in it is the
 *   ENI's, as EC2 delegates it) by one route through a link-local next hop whose neighbour entry is the ENI's MAC;
 *   everything else in the VPC's /56 is a blackhole;
 * - the source/destination check: ip6tables raw chains SRC6-<port> accepting only the ENI's addresses or its /80
 *   (and the link-local and unspecified sources neighbour discovery needs, which the kernel never forwards);
 * - the routers (each /64's base + 1) and IMDS's IPv6 address on the fabric's loopback; proxy neighbour discovery on
 *   every port answers for the routers and for every address the fabric routes elsewhere, as EC2's router answers
 *   for the whole subnet (Linux answers only for addresses on the interface asked, so each gets a proxy entry);
 * - the egress-only internet gateway in the NAT gateway's namespace: IPv6 from the VPC goes out and its replies come
 *   back (conntrack), anything else arriving from outside is dropped.
 */
import type { FabricNode } from '../topology.js';
import {
  candidateIps6,
  IMDS_IP6,
  NAT_INSIDE6,
  NAT_OUTSIDE6,
  SUBNET_BOOT,
  SUBNET_POD,
  TRAP_IP6,
  VPC_CIDR6,
} from '../topology.js';
import { ipBatch, restore, sysctl } from './net.js';

/** The next hop the fabric routes a pod ENI's /80 through: any link-local will do, its neighbour entry is the MAC. */
const ENI_NEXT_HOP = 'fe80::e:e';
/** The egress-only internet gateway's filter, in the NAT gateway's namespace (EIGW_DROP is what a control lifts). */
export const EIGW_CHAIN = 'EIGW';

export function buildFabric6(nodes: readonly FabricNode[]): void {
  const enis = nodes.flatMap((n) => n.enis);
  const gateways = [SUBNET_BOOT.gateway6, SUBNET_POD.gateway6];
  const sysctls = ['net.ipv6.conf.all.forwarding=1', 'net.ipv6.conf.default.forwarding=1'];
  const fabric = [
    ...[...gateways, IMDS_IP6].map((a) => `addr add ${a}/128 dev lo`),
    `route add blackhole ${VPC_CIDR6}`,
    `addr add ${NAT_INSIDE6.fabric}/${NAT_INSIDE6.prefixLength} dev fnat nodad`,
    `route add ::/0 via ${NAT_INSIDE6.nat}`,
  ];
  const raw = ['*raw'];
  const everyAddress = [...gateways, TRAP_IP6, ...enis.flatMap((e) => candidateIps6(e))];
  for (const eni of enis) {
    sysctls.push(`net.ipv6.conf.${eni.port}.proxy_ndp=1`, `net.ipv6.neigh.${eni.port}.proxy_delay=0`);
    const own = new Set(candidateIps6(eni));
    for (const address of everyAddress)
      if (!own.has(address)) fabric.push(`neigh add proxy ${address} dev ${eni.port}`);
    const chain = `SRC6-${eni.port}`;
    raw.push(`:${chain} - [0:0]`, `-A PREROUTING -i ${eni.port} -j ${chain}`);
    raw.push(`-A ${chain} -s fe80::/10 -j RETURN`, `-A ${chain} -s ::/128 -p ipv6-icmp -j RETURN`);
    for (const address of eni.ips6) {
      fabric.push(
        `route add ${address}/128 dev ${eni.port}`,
        `neigh replace ${address} lladdr ${eni.mac} dev ${eni.port} nud permanent`,
      );
      raw.push(`-A ${chain} -s ${address}/128 -j RETURN`);
    }
    if (eni.prefix6) {
      fabric.push(
        `neigh replace ${ENI_NEXT_HOP} lladdr ${eni.mac} dev ${eni.port} nud permanent`,
        `route add ${eni.prefix6} via ${ENI_NEXT_HOP} dev ${eni.port}`,
      );
      raw.push(`-A ${chain} -s ${eni.prefix6} -j RETURN`);
    }
    raw.push(`-A ${chain} -j DROP`);
  }
  sysctl(undefined, ...sysctls);
  ipBatch(undefined, fabric);
  restore(undefined, [...raw, 'COMMIT', ''].join('\n'), true, 6);
  for (const node of nodes) {
    // kube-proxy and L3/L3S need the node to forward IPv6 as it does IPv4.
    sysctl(node.name, 'net.ipv6.conf.all.forwarding=1');
    const boot = node.enis[0]!;
    ipBatch(node.name, [
      `addr add ${node.bootIp6}/64 dev ${boot.ifName} nodad`,
      `route add ::/0 via ${boot.subnet.gateway6} dev ${boot.ifName}`,
    ]);
  }
  sysctl('nat', 'net.ipv6.conf.all.forwarding=1');
  ipBatch('nat', [
    `addr add ${NAT_INSIDE6.nat}/${NAT_INSIDE6.prefixLength} dev in0 nodad`,
    `addr add ${NAT_OUTSIDE6.nat}/${NAT_OUTSIDE6.prefixLength} dev out0 nodad`,
    `route add ${VPC_CIDR6} via ${NAT_INSIDE6.fabric}`,
  ]);
  restore(
    'nat',
    [
      '*filter',
      `:${EIGW_CHAIN} - [0:0]`,
      `-A FORWARD -j ${EIGW_CHAIN}`,
      `-A ${EIGW_CHAIN} -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT`,
      `-A ${EIGW_CHAIN} -i in0 -o out0 -j ACCEPT`,
      `-A ${EIGW_CHAIN} -j DROP`,
      'COMMIT',
      '',
    ].join('\n'),
    false,
    6,
  );
  ipBatch('outside', [
    `addr add ${NAT_OUTSIDE6.outside}/${NAT_OUTSIDE6.prefixLength} dev eth0 nodad`,
    `route add ::/0 via ${NAT_OUTSIDE6.nat}`,
  ]);
}
