import { spawn } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { LocalCloud } from '../cloud.js';
import type { HostNet } from './host-net.js';
import { type AgentCounts, type AgentLine, type NodeAgent, scrapeAgentCounts, startNodeAgent } from './node-agents.js';
import type { Pod, PodCall, PodDriver } from './pods.js';

/**
 * Pods through the real CNI binary, run exactly as a container runtime runs it: one process per call, CNI_* in
 * the environment, the network configuration on stdin, a real network namespace per pod. Each simulated node
 * has its own IMDS endpoint (the plugin reads its identity and credentials there, as on EC2) and its own data
 * directory (journal and identity cache); the host interfaces of all nodes share this host's namespace, which
 * is fine because the plugin finds an ENI's interface by its unique MAC.
 */
export interface CniPodsOptions {
  readonly binary: string;
  readonly cloud: LocalCloud;
  readonly hostNet: HostNet;
  readonly tableName: string;
  /** Where per-node data directories and logs go (under .local/). */
  readonly workDir: string;
  readonly reuseWaitMs: number;
  /** The shim built beside the binary: with it, each node runs an agent and calls go shim → agent. */
  readonly shim?: string;
}

interface NodeContext {
  readonly imdsEndpoint: string;
  readonly dataDir: string;
  readonly logFile: string;
  readonly eniIds: Set<string>;
  readonly agent?: NodeAgent;
  /** Calls sent to this node (repeated ADDs of the holder check included), to set beside what its agent counted. */
  readonly sent: { add: number; del: number };
}

interface RunResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly latencyMs: number;
}

export class CniPods implements PodDriver {
  readonly kind = 'cni';
  private readonly nodes = new Map<string, NodeContext>();
  private readonly stopped: AgentLine[] = [];
  private readonly starting = new Map<string, Promise<NodeContext>>();

  constructor(private readonly options: CniPodsOptions) {}

  private async node(instanceId: string): Promise<NodeContext> {
    const ctx = this.nodes.get(instanceId);
    if (ctx) return ctx;
    // Concurrent first calls for a node share one start: one agent per node.
    let starting = this.starting.get(instanceId);
    if (!starting) {
      starting = this.startNode(instanceId);
      this.starting.set(instanceId, starting);
    }
    try {
      return await starting;
    } finally {
      this.starting.delete(instanceId);
    }
  }

  private async startNode(instanceId: string): Promise<NodeContext> {
    const dir = join(this.options.workDir, instanceId);
    mkdirSync(dir, { recursive: true });
    const imdsEndpoint = await this.options.cloud.imds.endpointFor(instanceId);
    const agent = this.options.shim
      ? await startNodeAgent(this.options.binary, instanceId, dir, this.options.hostNet)
      : undefined;
    const ctx: NodeContext = {
      imdsEndpoint,
      dataDir: join(dir, 'data'),
      logFile: join(dir, 'cni.log'),
      eniIds: new Set(),
      ...(agent ? { agent } : {}),
      sent: { add: 0, del: 0 },
    };
    this.nodes.set(instanceId, ctx);
    return ctx;
  }

  /** Each running node's agent: `--keep` records these in the local state. */
  agents(): readonly NodeAgent[] {
    return [...this.nodes.values()].flatMap((n) => (n.agent ? [n.agent] : []));
  }

  /** Every agent of the run with its counters: running ones scraped now, stopped ones as they were at the stop. */
  async agentLines(): Promise<readonly AgentLine[]> {
    const live = await Promise.all(
      [...this.nodes.values()].flatMap((n) => (n.agent ? [agentLine(n.agent, n.sent, true)] : [])),
    );
    return [...this.stopped, ...live];
  }

  async prepareNode(instanceId: string): Promise<void> {
    const ctx = await this.node(instanceId);
    for (const eni of this.options.cloud.ec2.api.instanceInterfaces(instanceId)) {
      // The boot ENI (device index 0) is never used for pods; an interface appears on the host once attached.
      if (eni.deviceIndex === 0 || eni.attachmentState !== 'attached') continue;
      await this.options.hostNet.ensureEniLink(eni.eniId, eni.mac);
      ctx.eniIds.add(eni.eniId);
    }
  }

  async add(pod: Pod): Promise<PodCall> {
    if (!pod.netns) pod.netns = await this.options.hostNet.addNetns();
    const out = await this.call('ADD', pod);
    if (out.code !== 0) return { ok: false, latencyMs: out.latencyMs, error: errorOf(out.stdout) };
    const result = JSON.parse(out.stdout) as { ips?: { address?: string }[] };
    const ip = result.ips?.[0]?.address?.split('/')[0];
    return { ok: ip !== undefined, latencyMs: out.latencyMs, ...(ip ? { ip } : { error: 'no address in result' }) };
  }

  async del(pod: Pod): Promise<PodCall> {
    const out = await this.call('DEL', pod);
    await this.options.hostNet.removeNetns(pod.netns);
    return out.code === 0
      ? { ok: true, latencyMs: out.latencyMs }
      : { ok: false, latencyMs: out.latencyMs, error: errorOf(out.stdout) };
  }

  async podAddress(pod: Pod): Promise<string | undefined> {
    const addresses = await this.options.hostNet.podAddresses(pod.netns, pod.ifName);
    return addresses[0];
  }

  async forgetNode(instanceId: string): Promise<void> {
    const ctx = this.nodes.get(instanceId);
    if (!ctx) return;
    if (ctx.agent) {
      this.stopped.push(await agentLine(ctx.agent, ctx.sent, false));
      await ctx.agent.stop();
    }
    for (const eniId of ctx.eniIds) await this.options.hostNet.removeEniLink(eniId);
    this.nodes.delete(instanceId);
  }

  async close(): Promise<void> {
    for (const id of [...this.nodes.keys()]) await this.forgetNode(id);
  }

  /** Removes the per-node directories (journals, identity caches, logs) of a previous run. */
  static resetWorkDir(workDir: string): void {
    rmSync(workDir, { recursive: true, force: true });
    mkdirSync(workDir, { recursive: true });
  }

  private async call(command: 'ADD' | 'DEL', pod: Pod): Promise<RunResult> {
    const ctx = await this.node(pod.instanceId);
    ctx.sent[command === 'ADD' ? 'add' : 'del'] += 1;
    const env: Record<string, string> = {
      PATH: process.env['PATH'] ?? '/usr/sbin:/usr/bin:/sbin:/bin',
      CNI_COMMAND: command,
      CNI_CONTAINERID: pod.containerId,
      CNI_NETNS: pod.netns,
      CNI_IFNAME: pod.ifName,
      CNI_PATH: '/opt/cni/bin',
      CNI_ARGS: `K8S_POD_NAMESPACE=default;K8S_POD_NAME=${pod.name}`,
      // Test mode: each simulated instance has its own IMDS on loopback (an IMDS override is honoured only in test
      // mode), and this kernel has no ipvlan, so macvlan stands in for the pod link kind; the rest is production.
      VPC_LEASE_TEST_MODE: '1',
      ...(this.options.hostNet.linkKind === 'macvlan' ? { VPC_LEASE_TEST_LINK_KIND: 'macvlan' } : {}),
    };
    const netconf = {
      cniVersion: '1.1.0',
      name: 'vpc-lease',
      type: 'vpc-lease-cni',
      tableName: this.options.tableName,
      dynamoEndpoint: this.options.cloud.endpoints.dynamodb,
      imdsEndpoint: ctx.imdsEndpoint,
      dataDir: ctx.dataDir,
      logFile: ctx.logFile,
      reuseWaitMs: this.options.reuseWaitMs,
    };
    // Through the shim to the node's agent, as the runtime calls it on a node; the shim falls back on its own.
    const executable = ctx.agent && this.options.shim ? this.options.shim : this.options.binary;
    if (ctx.agent) env['VPC_LEASE_AGENT_SOCKET'] = ctx.agent.socketPath;
    return this.options.hostNet.track(() => runPlugin(executable, env, JSON.stringify(netconf)));
  }
}

async function agentLine(
  agent: NodeAgent,
  sent: { readonly add: number; readonly del: number },
  running: boolean,
): Promise<AgentLine> {
  let counts: AgentCounts = { add: 0, del: 0, viaAgent: 0, fallback: 0 };
  try {
    counts = await scrapeAgentCounts(agent.metricsUrl);
  } catch {
    // An agent that cannot be scraped shows zeros; the report's call counts then disagree, which is visible.
  }
  return { instanceId: agent.instanceId, metricsUrl: agent.metricsUrl, running, sent: { ...sent }, ...counts };
}

function errorOf(stdout: string): string {
  try {
    const e = JSON.parse(stdout) as { code?: number; msg?: string; details?: string };
    return `CNI error ${e.code}: ${e.msg ?? ''}${e.details ? ` (${e.details})` : ''}`;
  } catch {
    return stdout.trim() || 'plugin failed without output';
  }
}

function runPlugin(file: string, env: Record<string, string>, stdin: string): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const start = performance.now();
    const child = spawn(file, [], { env, stdio: ['pipe', 'pipe', 'ignore'] });
    const out: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.on('error', reject);
    child.on('close', (code) =>
      resolve({ code, stdout: Buffer.concat(out).toString('utf8'), latencyMs: performance.now() - start }),
    );
    child.stdin.end(stdin);
  });
}
