/**
 * The fabric matrix's cells: what each configuration checks (pod↔pod, services, NodePort, IMDS, MTU, negative
 * controls from controls.ts, mode change, IAM). main.ts builds the cluster and runs them.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Mode, PodFamily } from '../configs.js';
import type { Service } from '../kube-proxy.js';
import type { CellResult } from '../results.js';
import { type FabricNode, IMDS_IP, NAT_OUTSIDE, slotAddresses, VPC_MTU } from '../topology.js';
import { BIG_BYTES, DNS_ANSWER } from './agent.js';
import { addPodNetns, type Cluster, shippedConfig } from './cluster.js';
import type { FabricImds } from './imds.js';
import { countExecs, exec, ip } from './net.js';
import { type Cell, get, type NodePods, type Pod, ping, short } from './probes.js';

const SVC = {
  remote: '10.96.0.21',
  local: '10.96.0.22',
  dns: '10.96.0.10',
  npCluster: '10.96.0.23',
  npLocal: '10.96.0.24',
} as const;
export const NODEPORT_CLUSTER = 30080;
export const NODEPORT_LOCAL = 30081;
export const HOST_PORT = 10250;

export function startAgent(
  cluster: Cluster,
  ns: string,
  kind: string,
  name: string,
  lasting = false,
): Promise<ChildProcess> {
  const argv = ['ip', 'netns', 'exec', ns, process.execPath, join(dirname(process.argv[1]!), 'agent.mjs'), kind, name];
  countExecs(argv);
  const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'inherit'] });
  cluster.track(child, lasting);
  // No timer: node starts slowly in the emulated guest, and an agent that never starts exits (or the VM times out).
  return new Promise((resolve, reject) => {
    child.stdout?.on('data', (c: Buffer) => {
      if (c.toString().includes('ready')) resolve(child);
    });
    child.once('exit', (code) => reject(new Error(`agent ${name} exited ${code}`)));
  });
}

export function services(p: Record<string, NodePods>): Service[] {
  const n1 = p['node1']!;
  const n2 = p['node2']!;
  const ep = (pod: Pod, port = 8080): { ip: string; port: number; node: string } => ({
    ip: pod.ip,
    port,
    node: pod.eni.node,
  });
  const web = { namespace: 'default', portName: 'http', protocol: 'tcp' as const, port: 80 };
  return [
    { ...web, name: 'web-remote', clusterIp: SVC.remote, endpoints: [ep(n2.client)] },
    { ...web, name: 'web-local', clusterIp: SVC.local, endpoints: [ep(n1.other)] },
    {
      namespace: 'kube-system',
      name: 'kube-dns',
      portName: 'dns',
      protocol: 'udp',
      port: 53,
      clusterIp: SVC.dns,
      endpoints: [ep(n2.same, 53)],
    },
    {
      ...web,
      name: 'np-cluster',
      clusterIp: SVC.npCluster,
      nodePort: NODEPORT_CLUSTER,
      externalTrafficPolicy: 'Cluster',
      endpoints: [ep(n2.client)],
    },
    {
      ...web,
      name: 'np-local',
      clusterIp: SVC.npLocal,
      nodePort: NODEPORT_LOCAL,
      externalTrafficPolicy: 'Local',
      endpoints: [ep(n1.other), ep(n2.other)],
    },
  ];
}

/** A cell passes when `run` resolves undefined; otherwise the string is why it failed. */
export async function runCells(config: string, cells: readonly Cell[], out: CellResult[]): Promise<void> {
  const results = await Promise.all(
    cells.map(async (c) => {
      const start = Date.now();
      let why: string | undefined;
      try {
        why = await c.run();
      } catch (err) {
        why = err instanceof Error ? err.message : String(err);
      }
      return { config, cell: c.name, ok: why === undefined, detail: why ?? '', ms: Date.now() - start };
    }),
  );
  for (const r of results)
    console.log(`${r.ok ? 'ok  ' : 'FAIL'} ${config} | ${r.cell}${r.ok ? '' : ` — ${r.detail}`}`);
  out.push(...results);
}

export function expectBody(r: { body?: string; why: string }, ...parts: string[]): string | undefined {
  if (r.body === undefined) return r.why;
  const missing = parts.filter((p) => !r.body!.includes(p));
  return missing.length === 0 ? undefined : `answered "${short(r.body)}", expected ${missing.join(', ')}`;
}

/** The matrix's own cells; the controls' cells (defences.ts) join them in every configuration. */
export function matrixCells(nodes: readonly FabricNode[], p: Record<string, NodePods>): Cell[] {
  const n1 = p['node1']!;
  const n2 = p['node2']!;
  const node1 = nodes[0]!;
  const who = (target: string, port = 8080): string => `http://${target}:${port}/cgi-bin/who`;
  return [
    {
      name: 'pod ↔ pod, same ENI',
      run: async () => expectBody(await get(n1.client.ns, who(n1.same.ip)), n1.same.name, n1.client.ip),
    },
    {
      name: 'pod ↔ pod, other ENI, same node',
      run: async () => expectBody(await get(n1.client.ns, who(n1.other.ip)), n1.other.name, n1.client.ip),
    },
    {
      name: 'pod ↔ pod, other node',
      run: async () => expectBody(await get(n1.client.ns, who(n2.client.ip)), n2.client.name, n1.client.ip),
    },
    {
      name: 'pod → ClusterIP → pod on another node',
      run: async () => expectBody(await get(n1.client.ns, who(SVC.remote, 80)), n2.client.name),
    },
    {
      name: 'pod → ClusterIP → pod on the same node',
      run: async () => expectBody(await get(n1.client.ns, who(SVC.local, 80)), n1.other.name),
    },
    {
      name: 'pod → DNS service (UDP ClusterIP, backend on another node)',
      async run() {
        const r = await exec(n1.client.ns, ['timeout', '20', 'busybox', 'nslookup', 'web.default.svc', SVC.dns]);
        return r.stdout.includes(DNS_ANSWER) ? undefined : short(r.stdout + r.stderr) || `exit ${r.code}`;
      },
    },
    {
      name: 'NodePort from outside, externalTrafficPolicy Cluster',
      run: async () => expectBody(await get('outside', who(node1.bootIp, NODEPORT_CLUSTER)), n2.client.name),
    },
    {
      name: 'NodePort from outside, externalTrafficPolicy Local (client address kept)',
      run: async () =>
        expectBody(await get('outside', who(node1.bootIp, NODEPORT_LOCAL)), n1.other.name, NAT_OUTSIDE.outside),
    },
    {
      name: 'pod → its host',
      run: async () => expectBody(await get(n1.client.ns, who(node1.bootIp, HOST_PORT)), 'node1', n1.client.ip),
    },
    {
      name: 'host → pod (kubelet probe)',
      run: async () => expectBody(await get('node1', who(n1.client.ip)), n1.client.name),
    },
    {
      name: 'hostNetwork pod on another node → pod',
      run: async () => expectBody(await get('node2', who(n1.client.ip)), n1.client.name, nodes[1]!.bootIp),
    },
    {
      name: 'pod → outside (through the NAT gateway)',
      run: async () =>
        expectBody(await get(n1.client.ns, `http://${NAT_OUTSIDE.outside}:8080/`), 'outside', NAT_OUTSIDE.nat),
    },
    {
      name: `MTU ${VPC_MTU} inside the VPC (pod link, 8972-byte ping to another node)`,
      async run() {
        const link = JSON.parse(ip('-n', n1.client.ns, '-j', 'link', 'show', 'eth0')) as { mtu: number }[];
        if (link[0]?.mtu !== VPC_MTU) return `the pod's eth0 has MTU ${link[0]?.mtu}`;
        return (await ping(n1.client.ns, n2.client.ip, ['-s', '8972'])) ? undefined : 'no answer to a 9000-byte ping';
      },
    },
    {
      name: 'path MTU toward outside (256 KiB each way over a 1500 hop)',
      async run() {
        const file = `/tmp/fabric/upload-${n1.client.id}`;
        writeFileSync(file, Buffer.alloc(BIG_BYTES, 0x62));
        const up = await exec(n1.client.ns, [
          'timeout',
          '30',
          'busybox',
          'wget',
          '-q',
          '-O',
          '-',
          '--post-file',
          file,
          `http://${NAT_OUTSIDE.outside}:8080/sink`,
        ]);
        if (!up.stdout.includes(`got ${BIG_BYTES}`))
          return `upload: ${short(up.stdout + up.stderr) || `exit ${up.code}`}`;
        const down = await exec(n1.client.ns, [
          'sh',
          '-c',
          'timeout 30 busybox wget -q -O - "$0" | wc -c',
          `http://${NAT_OUTSIDE.outside}:8080/big`,
        ]);
        return down.stdout.trim() === String(BIG_BYTES) ? undefined : `download: got ${short(down.stdout)} bytes`;
      },
    },
  ];
}

/** ipvlan's mode belongs to the master: an ADD asking another mode on an ENI with live pods must be refused. */
export function modeChangeCell(cluster: Cluster, mode: Mode, n1: NodePods, family: PodFamily = 'ipv4'): Cell {
  const other: Mode = mode === 'l2' ? 'l3' : 'l2';
  return {
    name: 'an ADD in another ipvlan mode on an ENI with live pods is refused',
    async run() {
      const eni = n1.client.eni;
      await cluster.addLeases(slotAddresses(eni, 2, family).map((address) => ({ eni, ip: address })));
      const ns = `${n1.client.ns}-mode`;
      addPodNetns(ns);
      try {
        const r = await cluster.plugin('node1', 'ADD', `${ns}-cid`, ns, { mode: other });
        const details = ip('-d', '-n', n1.client.ns, 'link', 'show', 'eth0');
        if (r.code === 0) {
          await cluster.plugin('node1', 'DEL', `${ns}-cid`, ns, { mode: other });
          return `accepted; the live pod's link now says: ${short(/ipvlan\s+mode \w+/.exec(details)?.[0] ?? details)}`;
        }
        if (!/mode/i.test(r.stdout)) return `refused, but not for the mode: ${short(r.stdout)}`;
        if (!new RegExp(`ipvlan\\s+mode ${mode} `).test(details))
          return `refused, yet the live pod's mode changed: ${short(details)}`;
        return undefined;
      } finally {
        ip('netns', 'del', ns);
      }
    },
  };
}

/** Invariant 7 on the fabric: every plugin request of every node was judged by the node policy and allowed. */
export function iamCell(cluster: Cluster): CellResult {
  const { allowed, denied } = cluster.iamDecisions();
  const ok = allowed > 0 && denied.length === 0;
  const detail = denied.length > 0 ? `denied: ${short(denied.join('; '))}` : ok ? '' : 'no node request was judged';
  return {
    config: 'install',
    cell: `every node request judged by the node policy and allowed (${allowed})`,
    ok,
    detail,
    ms: 0,
  };
}

export function installCells(cluster: Cluster, imds: FabricImds, nodes: readonly FabricNode[]): Cell[] {
  return [
    {
      name: 'the installer refuses the shipped config without a service CIDR, naming the flag',
      async run() {
        const r = await cluster.install('node1', shippedConfig());
        if (r.code === 0) return 'installed without a service CIDR';
        return r.stderr.includes('--service-cidrs') ? undefined : `refused, but: ${short(r.stderr)}`;
      },
    },
    {
      name: 'the IMDS stand-in answers the nodes',
      async run() {
        const r = await get('node1', `http://${IMDS_IP}/latest/meta-data/iam/security-credentials/`, 3);
        const seen = imds.requests.some((l) => l.startsWith(`${nodes[0]!.bootIp} `));
        return seen ? undefined : `no request from ${nodes[0]!.bootIp} reached it (${r.why})`;
      },
    },
  ];
}
