/**
 * The IPv6 half of the matrix (`ipv6` and `dual` configurations): the IPv4 cells' paths over the pods' IPv6
 * addresses, kube-proxy's ip6tables rules for the same services, NodePort from another VPC host (the egress-only
 * gateway keeps the outside host from starting any connection), IPv6 out through that gateway, and for an
 * `ipv6` pod its IPv4 out through the host's egress and the NAT gateway.
 */
import type { PodFamily } from '../configs.js';
import type { Service } from '../kube-proxy.js';
import { type FabricNode, NAT_OUTSIDE, NAT_OUTSIDE6, VPC_MTU } from '../topology.js';
import { expectBody, HOST_PORT, NODEPORT_CLUSTER, NODEPORT_LOCAL } from './cells.js';
import { ip } from './net.js';
import { type Cell, get, type NodePods, type Pod, ping, urlHost } from './probes.js';

/** The IPv6 ClusterIPs of the IPv4 cells' services (SERVICE_CIDR6): a dual-stack Service has one of each. */
const SVC6 = { remote: 'fd00:96::21', local: 'fd00:96::22', npCluster: 'fd00:96::23', npLocal: 'fd00:96::24' } as const;

const v6 = (pod: Pod): string => {
  if (!pod.ip6) throw new Error(`${pod.name} has no IPv6 address`);
  return pod.ip6;
};

/** The same Services as cells.ts's, as kube-proxy's ip6tables proxier sees them (the DNS service is IPv4's only). */
export function services6(p: Record<string, NodePods>): Service[] {
  const n1 = p['node1']!;
  const n2 = p['node2']!;
  const ep = (pod: Pod) => ({ ip: v6(pod), port: 8080, node: pod.eni.node });
  const web = { namespace: 'default', portName: 'http', protocol: 'tcp' as const, port: 80 };
  return [
    { ...web, name: 'web-remote', clusterIp: SVC6.remote, endpoints: [ep(n2.client)] },
    { ...web, name: 'web-local', clusterIp: SVC6.local, endpoints: [ep(n1.other)] },
    {
      ...web,
      name: 'np-cluster',
      clusterIp: SVC6.npCluster,
      nodePort: NODEPORT_CLUSTER,
      externalTrafficPolicy: 'Cluster',
      endpoints: [ep(n2.client)],
    },
    {
      ...web,
      name: 'np-local',
      clusterIp: SVC6.npLocal,
      nodePort: NODEPORT_LOCAL,
      externalTrafficPolicy: 'Local',
      endpoints: [ep(n1.other), ep(n2.other)],
    },
  ];
}

export function matrixCells6(nodes: readonly FabricNode[], p: Record<string, NodePods>, family: PodFamily): Cell[] {
  const n1 = p['node1']!;
  const n2 = p['node2']!;
  const [node1, node2] = nodes as [FabricNode, FabricNode];
  const who = (target: string, port = 8080): string => `http://${urlHost(target)}:${port}/cgi-bin/who`;
  const cells: Cell[] = [
    {
      name: 'pod ↔ pod, same ENI (IPv6)',
      run: async () => expectBody(await get(n1.client.ns, who(v6(n1.same))), n1.same.name, v6(n1.client)),
    },
    {
      name: 'pod ↔ pod, other ENI, same node (IPv6)',
      run: async () => expectBody(await get(n1.client.ns, who(v6(n1.other))), n1.other.name, v6(n1.client)),
    },
    {
      name: 'pod ↔ pod, other node (IPv6)',
      run: async () => expectBody(await get(n1.client.ns, who(v6(n2.client))), n2.client.name, v6(n1.client)),
    },
    {
      name: 'pod → ClusterIP → pod on another node (IPv6, ip6tables)',
      run: async () => expectBody(await get(n1.client.ns, who(SVC6.remote, 80)), n2.client.name),
    },
    {
      name: 'pod → ClusterIP → pod on the same node (IPv6, ip6tables)',
      run: async () => expectBody(await get(n1.client.ns, who(SVC6.local, 80)), n1.other.name),
    },
    {
      name: 'NodePort from another VPC host, externalTrafficPolicy Cluster (IPv6)',
      run: async () => expectBody(await get(node2.name, who(node1.bootIp6, NODEPORT_CLUSTER)), n2.client.name),
    },
    {
      name: 'NodePort from another VPC host, externalTrafficPolicy Local (client address kept) (IPv6)',
      run: async () =>
        expectBody(await get(node2.name, who(node1.bootIp6, NODEPORT_LOCAL)), n1.other.name, node2.bootIp6),
    },
    {
      name: 'pod → its host (IPv6)',
      run: async () => expectBody(await get(n1.client.ns, who(node1.bootIp6, HOST_PORT)), 'node1', v6(n1.client)),
    },
    {
      name: 'host → pod (kubelet probe) (IPv6)',
      run: async () => expectBody(await get(node1.name, who(v6(n1.client))), n1.client.name),
    },
    {
      name: 'hostNetwork pod on another node → pod (IPv6)',
      run: async () => expectBody(await get(node2.name, who(v6(n1.client))), n1.client.name, node2.bootIp6),
    },
    {
      name: 'pod → outside through the egress-only internet gateway (IPv6, source kept)',
      run: async () =>
        expectBody(await get(n1.client.ns, `http://${urlHost(NAT_OUTSIDE6.outside)}:8080/`), 'outside', v6(n1.client)),
    },
    {
      name: `MTU ${VPC_MTU} inside the VPC (IPv6, 8952-byte ping6 to another node)`,
      async run() {
        const link = JSON.parse(ip('-n', n1.client.ns, '-j', 'link', 'show', 'eth0')) as { mtu: number }[];
        if (link[0]?.mtu !== VPC_MTU) return `the pod's eth0 has MTU ${link[0]?.mtu}`;
        return (await ping(n1.client.ns, v6(n2.client), ['-s', '8952'])) ? undefined : 'no answer to a 9000-byte ping6';
      },
    },
  ];
  if (family === 'ipv6')
    cells.push({
      name: "pod → outside over IPv4 (the host's egress, then the NAT gateway)",
      run: async () =>
        expectBody(await get(n1.client.ns, `http://${NAT_OUTSIDE.outside}:8080/`), 'outside', NAT_OUTSIDE.nat),
    });
  return cells;
}
