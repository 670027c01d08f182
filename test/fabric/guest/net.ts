/**
 * Building the VPC inside the VM. The VM's root namespace is the fabric (the VPC's router); every node is a
 * network namespace with one veth per ENI whose node end carries the ENI's MAC. The fabric end of each ENI is
 * routed, not bridged:
 * - delivery only to the owner: one /32 route per assigned address to the owning ENI's port, with a permanent
 *   neighbour entry for the ENI's MAC (the VPC needs no ARP from the instance); everything else in the VPC CIDR
 *   is a blackhole;
 * - the source/destination check: a raw-table chain per port accepting only the addresses assigned to that ENI;
 * - the subnet gateways (.1) and the IMDS address live on the fabric's loopback, and proxy ARP answers the
 *   nodes' ARP for any address the fabric routes elsewhere (as the VPC answers ARP for the whole subnet);
 * - a NAT gateway namespace (masquerading the VPC CIDR) links to an "outside" namespace; the fabric↔NAT hop has
 *   an MTU of 1500 and everything else 9001, so traffic to the outside needs path MTU discovery.
 */
import { execFileSync } from 'node:child_process';
import { type PluginRun, runPluginProcess } from '../../support/plugin-process.js';
import {
  type FabricNode,
  IMDS_IP,
  NAT_INSIDE,
  NAT_OUTSIDE,
  SUBNET_BOOT,
  SUBNET_POD,
  VPC_CIDR,
  VPC_MTU,
} from '../topology.js';

/**
 * Programs the guest has executed, by name (`ip netns exec` counts as ip plus its program): under the VM's
 * emulation a process start costs ~0.1 s on a quiet machine, so this count is the run's work, reported with it.
 */
export const execCounts: Record<string, number> = {};

export function countExecs(argv: readonly string[]): void {
  let rest = argv;
  while (rest.length > 0) {
    const program = rest[0]!.split('/').pop()!;
    execCounts[program] = (execCounts[program] ?? 0) + 1;
    const options = rest.slice(1).findIndex((a) => !a.startsWith('-'));
    if (program === 'nsenter') rest = options < 0 ? [] : rest.slice(1 + options);
    else if (program === 'ip' && rest[1] === 'netns' && rest[2] === 'exec') rest = rest.slice(4);
    else rest = [];
  }
}

export function cmd(file: string, ...args: string[]): string {
  countExecs([file, ...args]);
  return execFileSync(file, args, { encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'] });
}

/** `ip -batch` in one namespace (undefined: the fabric): one process for many commands; their output. */
export function ipBatch(ns: string | undefined, commands: readonly string[], options: readonly string[] = []): string {
  if (commands.length === 0) return '';
  const argv = [...(ns ? ['-n', ns] : []), ...options, '-batch', '-'];
  countExecs(['ip', ...argv]);
  return execFileSync('ip', argv, {
    input: `${commands.join('\n')}\n`,
    encoding: 'utf8',
    stdio: ['pipe', 'pipe', 'pipe'],
  });
}

export function ip(...args: string[]): string {
  return cmd('ip', ...args);
}

export function sysctl(ns: string | undefined, ...settings: string[]): void {
  const argv = ['sysctl', '-qw', ...settings];
  if (ns) ip('netns', 'exec', ns, ...argv);
  else cmd(argv[0]!, ...argv.slice(1));
}

/** The IP version a rule or a probe is for: iptables or ip6tables. */
export type IpVersion = 4 | 6;
const tool = (v: IpVersion, name: string): string => (v === 6 ? name.replace(/^iptables/, 'ip6tables') : name);

export function restore(ns: string | undefined, input: string, noflush = true, v: IpVersion = 4): void {
  const argv = [tool(v, 'iptables-restore'), '-w', '5', ...(noflush ? ['--noflush'] : [])];
  const file = ns ? 'ip' : argv[0]!;
  const args = ns ? ['netns', 'exec', ns, ...argv] : argv.slice(1);
  countExecs([file, ...args]);
  execFileSync(file, args, { input, encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'] });
}

/**
 * A counting rule (no target unless given) inserted first in `chain` of a namespace (undefined: the fabric), told
 * apart by a comment: what a cell reads to see that a packet did or did not pass a point, instead of inferring it from a
 * missing answer.
 */
export interface ProbeRule {
  /** Packets counted so far. */
  count(): number;
  remove(): void;
}

let probes = 0;

export function probeRule(
  ns: string | undefined,
  table: string,
  chain: string,
  match: readonly string[],
  target: readonly string[] = [],
  v: IpVersion = 4,
): ProbeRule {
  const tag = `fabric-probe-${process.pid}-${++probes}`;
  const rule = [...match, '-m', 'comment', '--comment', tag, ...target];
  const iptables = (...args: string[]): string =>
    ns
      ? ip('netns', 'exec', ns, tool(v, 'iptables'), '-w', '5', ...args)
      : cmd(tool(v, 'iptables'), '-w', '5', ...args);
  iptables('-t', table, '-I', chain, '1', ...rule);
  return {
    count() {
      const count = ruleCounts(ns, table, v).find((r) => r.rule.includes(`--comment ${tag}`))?.packets;
      if (count === undefined) throw new Error(`probe ${tag} is gone from ${ns ?? 'the fabric'}'s ${table} table`);
      return count;
    },
    remove: () => void iptables('-t', table, '-D', chain, ...rule),
  };
}

/** Every rule of a table with its packet counter (`iptables-save -c`). */
export function ruleCounts(
  ns: string | undefined,
  table: string,
  v: IpVersion = 4,
): { rule: string; packets: number }[] {
  const argv = [tool(v, 'iptables-save'), '-c', '-t', table];
  const text = ns ? ip('netns', 'exec', ns, ...argv) : cmd(argv[0]!, ...argv.slice(1));
  return [...text.matchAll(/^\[(\d+):\d+\] (-A .*)$/gm)].map((m) => ({ rule: m[2]!, packets: Number(m[1]) }));
}

/** A command in a namespace (undefined: the fabric), asynchronous: the IMDS and dynalite run in this process. */
export function exec(
  ns: string | undefined,
  argv: readonly string[],
  env: Record<string, string> = {},
  stdin = '',
): Promise<PluginRun> {
  const full = ns ? ['ip', 'netns', 'exec', ns, ...argv] : [...argv];
  countExecs(full);
  const path = process.env['PATH'] ?? '/usr/sbin:/usr/bin:/sbin:/bin';
  return runPluginProcess(full[0]!, full.slice(1), { PATH: path, HOME: '/root', ...env }, stdin);
}

/** Kernel modules the fabric and kube-proxy's rules need (the guest cannot autoload them). */
const MODULES = [
  'nf_conntrack',
  'nft_ct',
  'nf_nat',
  'nft_chain_nat',
  'xt_nat',
  'xt_MASQUERADE',
  'xt_statistic',
  'xt_comment',
  'xt_conntrack',
  'xt_tcpudp',
  'xt_addrtype',
  'xt_mark',
  'xt_connmark',
  'xt_REJECT',
  'nf_reject_ipv4',
  'ipt_REJECT',
  'xt_DSCP',
  'xt_dscp',
  'nf_reject_ipv6',
  'ip6t_REJECT',
  'nf_defrag_ipv6',
];

export function loadModules(): void {
  try {
    cmd('modprobe', '-a', ...MODULES);
  } catch {
    // built in, or missing: the first iptables-restore that needs it says which
  }
}

/** The fabric, the NAT gateway, the outside host and every node's ENIs, from the assignment table. */
export function buildFabric(nodes: readonly FabricNode[]): void {
  loadModules();
  // One `ip -batch` per namespace and step (a process start is the expensive part of each command here).
  const links: string[] = ['link set lo up'];
  const fabric: string[] = [];
  // The fabric routes; its own source check is the raw table below, not rp_filter.
  sysctl(undefined, 'net.ipv4.ip_forward=1', 'net.ipv4.conf.all.rp_filter=0', 'net.ipv4.conf.default.rp_filter=0');
  const portSysctls: string[] = [];
  for (const address of [SUBNET_BOOT.gateway, SUBNET_POD.gateway, IMDS_IP]) links.push(`addr add ${address}/32 dev lo`);
  fabric.push(`route add blackhole ${VPC_CIDR}`);
  const raw: string[] = ['*raw'];
  const inNode = new Map<string, string[]>();
  for (const node of nodes) {
    ip('netns', 'add', node.name);
    // Amazon Linux's defaults: strict reverse-path filtering, forwarding on (kubelet and kube-proxy need it).
    sysctl(node.name, 'net.ipv4.ip_forward=1', 'net.ipv4.conf.all.rp_filter=1', 'net.ipv4.conf.default.rp_filter=1');
    const own = ['link set lo up'];
    inNode.set(node.name, own);
    for (const eni of node.enis) {
      links.push(`link add ${eni.port} mtu ${VPC_MTU} type veth peer name ${eni.ifName} netns ${node.name}`);
      // The boot ENI is the host's, configured at boot; a pod ENI arrives as EC2 hot-plugs it (down, no address,
      // the driver's MTU) and the plugin brings it up.
      own.push(`link set ${eni.ifName} address ${eni.mac}`);
      if (eni.deviceIndex === 0) own.push(`link set ${eni.ifName} mtu ${VPC_MTU} up`);
      fabric.push(`link set ${eni.port} up`);
      portSysctls.push(`net.ipv4.conf.${eni.port}.proxy_arp=1`, `net.ipv4.conf.${eni.port}.rp_filter=0`);
      const chain = `SRC-${eni.port}`;
      raw.push(`:${chain} - [0:0]`, `-A PREROUTING -i ${eni.port} -j ${chain}`);
      for (const address of eni.ips) {
        fabric.push(
          `route add ${address}/32 dev ${eni.port}`,
          `neigh replace ${address} lladdr ${eni.mac} dev ${eni.port} nud permanent`,
        );
        raw.push(`-A ${chain} -s ${address}/32 -j RETURN`);
      }
      raw.push(`-A ${chain} -j DROP`);
    }
    const boot = node.enis[0]!;
    own.push(
      `addr add ${node.bootIp}/${boot.subnet.prefixLength} dev ${boot.ifName}`,
      `route add default via ${boot.subnet.gateway} dev ${boot.ifName}`,
    );
  }
  ip('netns', 'add', 'nat');
  ip('netns', 'add', 'outside');
  links.push(
    `link add fnat mtu ${NAT_INSIDE.mtu} type veth peer name in0 netns nat`,
    `addr add ${NAT_INSIDE.fabric}/${NAT_INSIDE.prefixLength} dev fnat`,
    'link set fnat up',
  );
  ipBatch(undefined, links);
  sysctl(undefined, ...portSysctls);
  ipBatch(undefined, [...fabric, `route add default via ${NAT_INSIDE.nat}`]);
  for (const node of nodes) ipBatch(node.name, inNode.get(node.name)!);
  raw.push('COMMIT', '');
  restore(undefined, raw.join('\n'), false);

  // NAT gateway and the outside host.
  sysctl('nat', 'net.ipv4.ip_forward=1');
  ipBatch('nat', [
    'link set lo up',
    `link set in0 mtu ${NAT_INSIDE.mtu} up`,
    `addr add ${NAT_INSIDE.nat}/${NAT_INSIDE.prefixLength} dev in0`,
    `link add out0 mtu ${NAT_OUTSIDE.mtu} type veth peer name eth0 netns outside`,
    `addr add ${NAT_OUTSIDE.nat}/${NAT_OUTSIDE.prefixLength} dev out0`,
    'link set out0 up',
    `route add ${VPC_CIDR} via ${NAT_INSIDE.fabric}`,
  ]);
  ipBatch('outside', [
    'link set lo up',
    `link set eth0 mtu ${NAT_OUTSIDE.mtu} up`,
    `addr add ${NAT_OUTSIDE.outside}/${NAT_OUTSIDE.prefixLength} dev eth0`,
    `route add default via ${NAT_OUTSIDE.nat}`,
  ]);
  restore('nat', ['*nat', `-A POSTROUTING -s ${VPC_CIDR} -o out0 -j MASQUERADE`, 'COMMIT', ''].join('\n'), false);
}
