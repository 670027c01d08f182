/**
 * The in-guest fabric suite (bundled with esbuild, run with plain node inside the VM): builds the VPC, installs the
 * built plugin on every node with the real installer, and runs the matrix for every ipvlan mode × subnet kind,
 * writing each cell's result as JSON (after every configuration, so a guest that dies still reports).
 *   node guest.mjs <result-file> <built vpc-lease-cni>
 *   node guest.mjs agent <web|dns> <name>
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { SynthesizedNodePolicy } from '../../../infra/local/iam/node-policy.js';
import { KUBE_JUMPS, kubeProxyRules, type Service } from '../kube-proxy.js';
import {
  buildTopology,
  type Eni,
  type FabricNode,
  IMDS_IP,
  NAT_OUTSIDE,
  ownerOf,
  podEnis,
  SERVICE_CIDR,
  SUBNET_BOOT,
  type SubnetKind,
  TRAP_IP,
  UNASSIGNED_SOURCE,
  VPC_CIDR,
  VPC_MTU,
} from '../topology.js';
import { BIG_BYTES, DNS_ANSWER, runAgent } from './agent.js';
import { addPodNetns, Cluster, ROOT, shippedConfig } from './cluster.js';
import { type FabricImds, startFabricImds } from './imds.js';
import { buildFabric, cmd, exec, ip, restore } from './net.js';

export interface CellResult {
  readonly config: string;
  readonly cell: string;
  readonly ok: boolean;
  readonly detail: string;
  readonly ms: number;
}

type Mode = 'l2' | 'l3' | 'l3s';
interface Pod {
  readonly ns: string;
  readonly id: string;
  readonly ip: string;
  readonly eni: Eni;
  readonly name: string;
}
interface NodePods {
  readonly client: Pod;
  readonly same: Pod;
  readonly other: Pod;
  readonly noVeth: Pod;
}

const MODES: readonly Mode[] = ['l2', 'l3', 'l3s'];
const KINDS: readonly SubnetKind[] = ['boot', 'pod'];
const SVC = {
  remote: '10.96.0.21',
  local: '10.96.0.22',
  dns: '10.96.0.10',
  npCluster: '10.96.0.23',
  npLocal: '10.96.0.24',
} as const;
const NODEPORT_CLUSTER = 30080;
const NODEPORT_LOCAL = 30081;
const HOST_PORT = 10250;

if (process.argv[2] === 'agent') runAgent(process.argv[3] ?? 'web', process.argv[4] ?? 'agent');
else await main();

function short(text: string): string {
  return text.replace(/\s+/g, ' ').trim().slice(0, 240);
}

/** HTTP GET from a namespace; the body, or undefined with why. */
async function get(ns: string | undefined, url: string, seconds = 12): Promise<{ body?: string; why: string }> {
  const r = await exec(ns, ['timeout', String(seconds), 'busybox', 'wget', '-q', '-O', '-', url]);
  return r.code === 0
    ? { body: r.stdout, why: '' }
    : { why: r.code === 124 ? 'timed out' : short(r.stderr) || `exit ${r.code}` };
}

/** Three echoes, any answer counts: a lone first packet lost to neighbour resolution is not a dead path. */
async function ping(ns: string | undefined, target: string, extra: readonly string[] = []): Promise<boolean> {
  const r = await exec(ns, ['busybox', 'ping', '-c', '3', '-W', '8', ...extra, target]);
  return r.code === 0;
}

function startAgent(cluster: Cluster, ns: string, kind: string, name: string, lasting = false): Promise<ChildProcess> {
  const child = spawn('ip', ['netns', 'exec', ns, process.execPath, process.argv[1]!, 'agent', kind, name], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  cluster.track(child, lasting);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`agent ${name} did not start`)), 30_000);
    child.stdout?.on('data', (c: Buffer) => {
      if (c.toString().includes('ready')) {
        clearTimeout(timer);
        resolve(child);
      }
    });
    child.once('exit', (code) => reject(new Error(`agent ${name} exited ${code}`)));
  });
}

function services(p: Record<string, NodePods>): Service[] {
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

interface Cell {
  readonly name: string;
  run(): Promise<string | undefined>;
}

/** A cell passes when `run` resolves undefined; otherwise the string is why it failed. */
async function runCells(config: string, cells: readonly Cell[], out: CellResult[]): Promise<void> {
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

function expectBody(r: { body?: string; why: string }, ...parts: string[]): string | undefined {
  if (r.body === undefined) return r.why;
  const missing = parts.filter((p) => !r.body!.includes(p));
  return missing.length === 0 ? undefined : `answered "${short(r.body)}", expected ${missing.join(', ')}`;
}

function imdsBlocked(imds: FabricImds, pod: Pod): Cell {
  return {
    name: `pod → IMDS is blocked (${pod.name.endsWith('noveth') ? 'no host veth' : 'with host veth'})`,
    async run() {
      const before = imds.requests.length;
      const r = await get(pod.ns, `http://${IMDS_IP}/latest/meta-data/iam/security-credentials/`, 15);
      const reached = imds.requests.slice(before).filter((l) => l.startsWith(`${pod.ip} `));
      if (reached.length > 0) return `the pod reached IMDS: ${reached.join('; ')}`;
      if (r.body !== undefined) return `the pod got an answer from ${IMDS_IP}: ${short(r.body)}`;
      return undefined;
    },
  };
}

function matrixCells(imds: FabricImds, nodes: readonly FabricNode[], p: Record<string, NodePods>): Cell[] {
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
    imdsBlocked(imds, n1.client),
    imdsBlocked(imds, n1.noVeth),
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
    {
      name: 'negative control: a pod sending from an unassigned address is dropped',
      async run() {
        if (!(await ping(n1.client.ns, n2.client.ip)))
          return 'positive twin failed: no answer from the assigned address';
        ip('-n', n1.client.ns, 'addr', 'add', `${UNASSIGNED_SOURCE}/32`, 'dev', 'eth0');
        try {
          return (await ping(n1.client.ns, n2.client.ip, ['-I', UNASSIGNED_SOURCE]))
            ? 'answered: the fabric forwarded an unassigned source (a bridge?)'
            : undefined;
        } finally {
          ip('-n', n1.client.ns, 'addr', 'del', `${UNASSIGNED_SOURCE}/32`, 'dev', 'eth0');
        }
      },
    },
    {
      name: 'negative control: an address no ENI owns gets nothing',
      async run() {
        if (!(await ping(n1.client.ns, nodes[1]!.bootIp))) return 'positive twin failed: node2 unreachable';
        return (await ping(n1.client.ns, TRAP_IP))
          ? `${TRAP_IP} answered: the fabric delivered it (a bridge?)`
          : undefined;
      },
    },
  ];
}

async function addPods(
  cluster: Cluster,
  node: FabricNode,
  config: string,
  podsOut: Pod[],
): Promise<string | undefined> {
  // In parallel, as kubelet starts pods; roles are given after, from where each address landed.
  const runs = await Promise.all(
    [0, 1, 2, 3].map(async (i) => {
      const ns = `${config}-${node.name}-${i}`.replace(/\//g, '-');
      const id = `${ns}-cid`;
      addPodNetns(ns);
      const override = i === 3 ? { hostVeth: false, serviceCidrs: [] } : {};
      return { ns, id, i, r: await cluster.plugin(node.name, 'ADD', id, ns, override) };
    }),
  );
  const errors: string[] = [];
  for (const { ns, id, i, r } of runs) {
    const address = ((r.json?.['ips'] as { address: string }[] | undefined)?.[0]?.address ?? '').split('/')[0]!;
    const eni = ownerOf(cluster.nodes, address);
    if (r.code !== 0) errors.push(`ADD of ${ns} exited ${r.code}: ${short(r.stdout + r.stderr)}`);
    else if (!eni) errors.push(`ADD of ${ns} returned ${address}, which no ENI owns`);
    else podsOut.push({ ns, id, ip: address, eni, name: i === 3 ? `${node.name}-noveth` : '' });
  }
  return errors[0];
}

function roles(node: FabricNode, pods: Pod[]): NodePods {
  const veth = pods.slice(0, 3);
  const byEni = new Map<string, Pod[]>();
  for (const pod of veth) byEni.set(pod.eni.id, [...(byEni.get(pod.eni.id) ?? []), pod]);
  const pair = [...byEni.values()].find((g) => g.length === 2);
  const single = [...byEni.values()].find((g) => g.length === 1);
  if (!pair || !single)
    throw new Error(`unexpected placement on ${node.name}: ${veth.map((p) => `${p.ip}@${p.eni.id}`).join(', ')}`);
  const named = (pod: Pod, role: string): Pod => ({ ...pod, name: `${node.name}-${role}` });
  return {
    client: named(pair[0]!, 'client'),
    same: named(pair[1]!, 'same'),
    other: named(single[0]!, 'other'),
    noVeth: pods[3]!,
  };
}

async function runConfig(
  cluster: Cluster,
  imds: FabricImds,
  mode: Mode,
  kind: SubnetKind,
  out: CellResult[],
): Promise<void> {
  const config = `${mode}/${kind}`;
  const nodes = cluster.nodes;
  const installs = await Promise.all(
    // The ConfigMap's mode changed: the DaemonSet's rollout reinstalls (once per mode, not per subnet kind). Keyed
    // on the mode last installed, not on the loop's position: with `only` a configuration may run after one of
    // another mode in the other kind, and must not inherit that mode's conflist.
    (cluster.installedMode !== mode ? nodes : []).map((n) =>
      cluster.install(n.name, JSON.stringify({ ...JSON.parse(shippedConfig()), mode }), [
        '--service-cidrs',
        SERVICE_CIDR,
      ]),
    ),
  );
  const badInstall = installs.find((r) => r.code !== 0);
  if (badInstall) {
    cluster.installedMode = undefined;
    out.push({ config, cell: 'install', ok: false, detail: short(badInstall.stderr), ms: 0 });
    return;
  }
  cluster.installedMode = mode;
  const installed = nodes.map((n) => (cluster.conflist(n.name)['plugins'] as { mode?: string }[])[0]?.mode);
  if (installed.some((m) => m !== mode)) {
    out.push({ config, cell: 'install', ok: false, detail: `conflists say mode ${installed.join(', ')}`, ms: 0 });
    return;
  }
  // Two addresses on each of the two pod ENIs of this kind, per node: 3 pods with the host veth, 1 without.
  const leases = nodes.flatMap((n) =>
    podEnis(n, kind).flatMap((eni) => eni.ips.slice(1, 3).map((a) => ({ eni, ip: a }))),
  );
  await cluster.resetLeases(leases);
  const pods: Record<string, Pod[]> = Object.fromEntries(nodes.map((n) => [n.name, []]));
  const addErrors = await Promise.all(nodes.map((n) => addPods(cluster, n, config, pods[n.name]!)));
  const addError = addErrors.find((e) => e !== undefined);
  try {
    if (addError) {
      out.push({ config, cell: 'ADD', ok: false, detail: addError, ms: 0 });
      writeAddDiagnostics(config);
      return;
    }
    const p = Object.fromEntries(nodes.map((n) => [n.name, roles(n, pods[n.name]!)]));
    for (const n of nodes) {
      const np = p[n.name]!;
      for (const pod of [np.client, np.same, np.other]) cluster.web(pod.ns, pod.name);
      const rules = kubeProxyRules(services(p), { clusterCidr: VPC_CIDR, nodeName: n.name });
      const jumps = cluster.jumpsApplied.has(n.name)
        ? ''
        : [
            '*filter',
            ...KUBE_JUMPS.filter(([t]) => t === 'filter').map(([, r]) => `-A ${r}`),
            'COMMIT',
            '*nat',
            ...KUBE_JUMPS.filter(([t]) => t === 'nat').map(([, r]) => `-A ${r}`),
            'COMMIT',
            '',
          ].join('\n');
      cluster.jumpsApplied.add(n.name);
      restore(n.name, rules);
      if (jumps) restore(n.name, jumps);
    }
    await startAgent(cluster, p['node2']!.same.ns, 'dns', 'dns');
    await new Promise((r) => setTimeout(r, 500)); // busybox httpd has no readiness signal
    await runCells(config, matrixCells(imds, nodes, p), out);
    if (out.some((r) => r.config === config && !r.ok)) writeDiagnostics(config, p);
    await runCells(config, [modeChangeCell(cluster, mode, p['node1']!)], out);
  } finally {
    cluster.stopWorkloads();
    const dels = await Promise.all(
      nodes.flatMap((n) => pods[n.name]!.map((pod) => cluster.plugin(n.name, 'DEL', pod.id, pod.ns))),
    );
    const badDel = dels.find((r) => r.code !== 0);
    out.push({
      config,
      cell: 'DEL of every pod',
      ok: !badDel,
      detail: badDel ? short(badDel.stdout + badDel.stderr) : '',
      ms: 0,
    });
    for (const n of nodes) for (const pod of pods[n.name]!) ip('netns', 'del', pod.ns);
  }
}

/** What explains a failed ADD: the plugin's own log on each node (the last 200 lines). */
function writeAddDiagnostics(config: string): void {
  const dir = dirname(process.argv[2]!);
  for (const node of ['node1', 'node2']) {
    try {
      const lines = readFileSync(join(ROOT, node, 'var/log/vpc-lease/cni.log'), 'utf8').trim().split('\n');
      writeFileSync(join(dir, `diag-${config.replace('/', '-')}-${node}-cni.log`), lines.slice(-200).join('\n'));
    } catch (err) {
      writeFileSync(join(dir, `diag-${config.replace('/', '-')}-${node}-cni.log`), String(err));
    }
  }
}

/** What explains a FAIL: counters of every rule on both nodes and the fabric, rules and routes, pod routes. */
function writeDiagnostics(config: string, p: Record<string, NodePods>): void {
  const dir = dirname(process.argv[2]!);
  const safe = (f: () => string): string => {
    try {
      return f();
    } catch (err) {
      return String(err);
    }
  };
  const sections: string[] = [
    `fabric raw (source check drops):\n${safe(() => cmd('iptables', '-w', '5', '-t', 'raw', '-S', '-v'))}`,
  ];
  for (const ns of ['node1', 'node2'])
    sections.push(
      `${ns} iptables-save -c:\n${safe(() => cmd('ip', 'netns', 'exec', ns, 'iptables-save', '-c'))}`,
      `${ns} rules:\n${safe(() => ip('-n', ns, 'rule', 'show'))}`,
      `${ns} routes:\n${safe(() => ip('-n', ns, 'route', 'show', 'table', 'all'))}`,
    );
  const c = p['node1']!.client;
  sections.push(`${c.name} routes:\n${safe(() => ip('-n', c.ns, 'route', 'show', 'table', 'all'))}`);
  sections.push(`${c.name} rules:\n${safe(() => ip('-n', c.ns, 'rule', 'show'))}`);
  writeFileSync(join(dir, `diag-${config.replace('/', '-')}.txt`), sections.join('\n\n'));
}

/** ipvlan's mode belongs to the master: an ADD asking another mode on an ENI with live pods must be refused. */
function modeChangeCell(cluster: Cluster, mode: Mode, n1: NodePods): Cell {
  const other: Mode = mode === 'l2' ? 'l3' : 'l2';
  return {
    name: 'an ADD in another ipvlan mode on an ENI with live pods is refused',
    async run() {
      await cluster.addLeases([{ eni: n1.client.eni, ip: n1.client.eni.ips[3]! }]);
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
function iamCell(cluster: Cluster): CellResult {
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

async function main(): Promise<void> {
  const [resultFile, cni, policyFile] = process.argv.slice(2);
  if (!resultFile || !cni || !policyFile) {
    console.error('usage: guest.mjs <result-file> <path of the built vpc-lease-cni> <synthesized node policy JSON>');
    process.exit(2);
  }
  const only = process.env['FABRIC_ONLY']?.split(',');
  const out: CellResult[] = [];
  const save = (): void => writeFileSync(resultFile, JSON.stringify(out, null, 1));
  const nodes = buildTopology();
  buildFabric(nodes);
  ip('-n', 'node2', 'addr', 'add', `${TRAP_IP}/32`, 'dev', 'eth0');
  const cluster = new Cluster(nodes, cni);
  await cluster.startStore(JSON.parse(readFileSync(policyFile, 'utf8')) as SynthesizedNodePolicy);
  const imds = await startFabricImds(nodes, (instanceId) => cluster.sessionFor(instanceId));
  const outside = startAgent(cluster, 'outside', 'web', 'outside', true);
  for (const n of nodes) cluster.web(n.name, n.name, HOST_PORT, true);
  await outside;
  for (const n of nodes) await startAgent(cluster, n.name, 'relay', SUBNET_BOOT.gateway, true);
  try {
    await runCells('install', installCells(cluster, imds, nodes), out);
    save();
    for (const mode of MODES)
      for (const kind of KINDS) {
        if (only && !only.includes(`${mode}/${kind}`)) continue;
        try {
          await runConfig(cluster, imds, mode, kind, out);
        } catch (err) {
          out.push({ config: `${mode}/${kind}`, cell: 'setup', ok: false, detail: String(err), ms: 0 });
        }
        save();
      }
    out.push(iamCell(cluster));
  } finally {
    save();
    await cluster.close();
    await imds.close();
  }
  process.exit(out.some((r) => !r.ok) ? 1 : 0);
}

function installCells(cluster: Cluster, imds: FabricImds, nodes: readonly FabricNode[]): Cell[] {
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
