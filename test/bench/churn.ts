import { mkdtempSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { scrapeAgentCounts } from '../../infra/local/scenario/node-agents.js';
import type { Lease } from '../../shared/domain/lease.js';
import { LightDynamoClient } from '../../shared/dynamo/light-client.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import { startAgent } from '../node/support/agent-process.js';
import { missing } from '../support/capabilities.js';
import { CniBenchNode } from './cni-node.js';
import { childrenCpuMs, selfCpuMs } from './cpu.js';
import { countDuplicates, type Holding } from './holdings.js';
import { startRequestCounter } from './request-counter.js';
import { elapsedMs, percentile, round } from './stats.js';

export interface ChurnBenchOptions {
  readonly loops: number;
  readonly seconds: number;
  /** Leases on the node: a few more than loops, so claims contend for the same candidates. */
  readonly leases: number;
}

interface LoopStats {
  cycles: number;
  addMs: number[];
  delMs: number[];
  failures: string[];
  holdings: Holding[];
}

/**
 * `churn`: `loops` kubelet-like workers on one node, each ADD → DEL → ADD … with the real plugin processes in
 * their own pod netns, for a fixed time. ADD and DEL reach dynalite through two different counting proxies, so
 * requests per command are exact even while they interleave. Then the same loops on the lease store alone,
 * in-process, which is the store's ceiling without process start-up.
 */
export async function runChurnBench(options: ChurnBenchOptions): Promise<Record<string, unknown>> {
  const skip = missing('root', 'netns');
  if (skip) return { skipped: skip };
  const node = await CniBenchNode.start();
  const delCounter = await startRequestCounter(node.fixture.dynalite.endpoint);
  // Through the shim and the resident agent, as the runtime runs it since #22.
  const agentSocket = join(mkdtempSync(join(node.fixture.dir, 'agent-')), 'run', 'agent.sock');
  // Its own metrics port (0: the kernel picks), so the bench never collides with another agent on 61680.
  const agent = await startAgent(node.binary, agentSocket, {
    PATH: process.env['PATH'] ?? '/usr/bin:/bin',
    VPC_LEASE_METRICS_ADDRESS: '127.0.0.1:0',
  });
  node.agentSocket = agentSocket;
  try {
    await node.fixture.seed(options.leases);
    const addConf = node.netconf(true);
    const delConf = node.netconf(false, { dynamoEndpoint: delCounter.endpoint });
    const netnses = Array.from({ length: options.loops }, () => node.fixture.addNetns());
    // Warm the identity and code caches once, as on a node that already runs pods.
    await node.run('ADD', { netns: netnses[0]!, containerId: 'warm' }, addConf);
    await node.run('DEL', { netns: netnses[0]!, containerId: 'warm' }, delConf);
    node.dynamoCounter.reset();
    node.ec2Trap.reset();
    const metricsUrl = metricsUrlOf(agent.stderr());
    const agentBefore = await scrapeAgentCounts(metricsUrl);

    const childCpu0 = childrenCpuMs();
    const selfCpu0 = selfCpuMs();
    const t0 = performance.now();
    const deadline = t0 + options.seconds * 1000;
    const loop = async (index: number): Promise<LoopStats> => {
      const stats: LoopStats = { cycles: 0, addMs: [], delMs: [], failures: [], holdings: [] };
      const netns = netnses[index]!;
      for (let i = 0; performance.now() < deadline; i++) {
        const containerId = `churn-${index}-${i}`;
        const addStart = process.hrtime.bigint();
        const add = await node.run('ADD', { netns, containerId }, addConf);
        const addEnd = performance.now();
        stats.addMs.push(elapsedMs(addStart));
        const ip = (add.json?.['ips'] as { address: string }[] | undefined)?.[0]?.address.split('/')[0];
        if (add.code !== 0 || !ip) stats.failures.push(`ADD: ${add.stdout.trim()}`);
        const delStart = process.hrtime.bigint();
        const delStartMs = performance.now();
        const del = await node.run('DEL', { netns, containerId }, delConf);
        stats.delMs.push(elapsedMs(delStart));
        if (del.code !== 0) stats.failures.push(`DEL: ${del.stdout.trim()}`);
        if (ip) stats.holdings.push({ ip, pod: containerId, fromMs: addEnd, untilMs: delStartMs });
        if (add.code === 0 && del.code === 0) stats.cycles += 1;
      }
      return stats;
    };
    const sampling = sampleClaims(() => node.fixture.store.listLeases(node.fixture.arn), deadline);
    const results = await Promise.all(Array.from({ length: options.loops }, (_, i) => loop(i)));
    const seconds = (performance.now() - t0) / 1000;
    const claims = await sampling;
    const pluginCpuMs = childrenCpuMs() - childCpu0;
    const serverCpuMs = selfCpuMs() - selfCpu0;
    const all = {
      cycles: results.reduce((s, r) => s + r.cycles, 0),
      addMs: results.flatMap((r) => r.addMs),
      delMs: results.flatMap((r) => r.delMs),
      failures: results.flatMap((r) => r.failures),
      holdings: results.flatMap((r) => r.holdings),
    };
    const duplicates = countDuplicates(all.holdings);
    const ipOf = new Map(all.holdings.map((h) => [h.pod, h.ip]));
    // A holder the store showed on another address than its ADD returned: two holders on one lease, seen in the store.
    const holderOnAnotherAddress = [...claims.ipsByHolder].filter(([pod, ips]) =>
      [...ips].some((ip) => ipOf.has(pod) && ipOf.get(pod) !== ip),
    ).length;
    const leasesAtEnd = await node.fixture.store.listLeases(node.fixture.arn);
    const leftClaimed = leasesAtEnd.filter((l) => l.state === 'CLAIMED');
    // Every pod is deleted by now, so a lease is lost when it is missing or anything but FREE or COOLDOWN.
    const lostLeases =
      options.leases -
      leasesAtEnd.length +
      leasesAtEnd.filter((l) => l.state !== 'FREE' && l.state !== 'COOLDOWN').length;
    const agentAfter = await scrapeAgentCounts(metricsUrl);
    const agentCounts = {
      add: agentAfter.add - agentBefore.add,
      del: agentAfter.del - agentBefore.del,
      viaAgent: agentAfter.viaAgent - agentBefore.viaAgent,
      fallback: agentAfter.fallback - agentBefore.fallback,
    };
    const calls = all.addMs.length + all.delMs.length;
    const podsPerSecond = round(all.cycles / seconds);
    const adds = all.addMs.length;
    const store = await storeOnlyChurn(node, options);
    return {
      loops: options.loops,
      seconds: round(seconds),
      leases: options.leases,
      path: 'shim → agent',
      pods: all.cycles,
      podsPerSecond,
      addP50Ms: round(percentile(all.addMs, 50)),
      addP99Ms: round(percentile(all.addMs, 99)),
      delP50Ms: round(percentile(all.delMs, 50)),
      delP99Ms: round(percentile(all.delMs, 99)),
      adds,
      /** CPU of the plugin processes (ADD + DEL) per pod: what bounds throughput once the machine is idle. */
      pluginCpuMsPerPod: round(pluginCpuMs / Math.max(1, adds)),
      /** CPU of dynalite, the proxies and this driver per pod (they share the machine with the plugin here). */
      localServicesCpuMsPerPod: round(serverCpuMs / Math.max(1, adds)),
      cpuBoundPodsPerSecondIdle: round((availableParallelism() * 1000) / Math.max(1, pluginCpuMs / Math.max(1, adds))),
      failures: all.failures.length,
      firstFailure: all.failures[0],
      /** Pairs of pods whose sure holds of one address overlapped (each loop has its own netns: an address in two). */
      duplicates,
      /** Store samples during the run: a holder with two CLAIMED leases, or on another address than its ADD got. */
      storeSamples: claims.samples,
      holdersWithTwoClaims: claims.holdersWithTwoClaims,
      holderOnAnotherAddress,
      claimedLeftAfterAllDels: leftClaimed.length,
      lostLeases,
      /** Calls the agent did not serve itself: the shim ran the full plugin (counted by the agent's own metrics). */
      fallbacks: calls - agentCounts.viaAgent,
      agentCounted: agentCounts,
      dynamoRequestsPerAdd: round(node.dynamoCounter.total() / adds),
      dynamoRequestsPerDel: round(delCounter.total() / all.delMs.length),
      dynamoAddRequestsByOperation: Object.fromEntries(node.dynamoCounter.counts),
      ec2RequestsPerPod: round(node.ec2Trap.total() / adds),
      storeOnly: store,
      targets: {
        atLeast50PodsPerSecond: podsPerSecond >= 50,
        noDuplicates: duplicates === 0 && claims.holdersWithTwoClaims === 0 && holderOnAnotherAddress === 0,
        noLostLeases: lostLeases === 0,
      },
    };
  } finally {
    await agent.stop();
    await delCounter.close();
    await node.close();
  }
}

/** The agent's metrics URL, from its "metrics listening" log line. */
function metricsUrlOf(stderr: string): string {
  const line = stderr.split('\n').find((l) => l.includes('"metrics listening"'));
  const url = line ? (JSON.parse(line) as { url?: string }).url : undefined;
  if (!url) throw new Error(`the agent logged no metrics URL: ${stderr.slice(-500)}`);
  return url;
}

/**
 * Reads the node's leases over and over until `deadlineMs` (performance.now()), recording which addresses each
 * holder was seen CLAIMED on and how often one holder held two at once.
 */
async function sampleClaims(
  list: () => Promise<readonly Lease[]>,
  deadlineMs: number,
): Promise<{ samples: number; holdersWithTwoClaims: number; ipsByHolder: Map<string, Set<string>> }> {
  const ipsByHolder = new Map<string, Set<string>>();
  let samples = 0;
  let holdersWithTwoClaims = 0;
  while (performance.now() < deadlineMs) {
    const perHolder = new Map<string, number>();
    for (const lease of await list()) {
      if (lease.state !== 'CLAIMED' || !lease.holder) continue;
      const pod = lease.holder.containerId;
      perHolder.set(pod, (perHolder.get(pod) ?? 0) + 1);
      ipsByHolder.set(pod, (ipsByHolder.get(pod) ?? new Set()).add(lease.ip));
    }
    holdersWithTwoClaims += [...perHolder.values()].filter((n) => n > 1).length;
    samples += 1;
    // A few reads a second: enough to catch a double claim that lasts, without loading dynalite under the pods.
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return { samples, holdersWithTwoClaims, ipsByHolder };
}

/** The same loops on DynamoLeaseStore over the CNI's light client, in this process: claim, then release by ip. */
async function storeOnlyChurn(node: CniBenchNode, options: ChurnBenchOptions): Promise<Record<string, unknown>> {
  const api = new LightDynamoClient({
    endpoint: node.fixture.dynalite.endpoint,
    region: 'us-east-1',
    credentials: async () => ({ accessKeyId: 'test', secretAccessKey: 'test' }),
  });
  const store = new DynamoLeaseStore({ api, tableName: node.fixture.tableName });
  const arn = node.fixture.arn;
  const seconds = Math.min(options.seconds, 5);
  const deadline = performance.now() + seconds * 1000;
  const claimMs: number[] = [];
  const holdings: Holding[] = [];
  const failures = new Map<string, number>();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: options.loops }, async (_, index) => {
      for (let i = 0; performance.now() < deadline; i++) {
        const holder = { containerId: `store-${index}-${i}`, ifName: 'eth0', netns: `/var/run/netns/s${index}` };
        const start = process.hrtime.bigint();
        try {
          const lease = await store.claim(arn, holder, Date.now(), { checkExisting: false });
          claimMs.push(elapsedMs(start));
          const from = performance.now();
          // Hold across a turn of the event loop so other workers' claims interleave with this hold.
          await new Promise((resolve) => setImmediate(resolve));
          const until = performance.now();
          await store.release(arn, holder, Date.now(), 0, lease.ip);
          holdings.push({ ip: lease.ip, pod: holder.containerId, fromMs: from, untilMs: until });
        } catch (err) {
          failures.set((err as Error).name, (failures.get((err as Error).name) ?? 0) + 1);
        }
      }
    }),
  );
  const elapsedS = (performance.now() - t0) / 1000;
  return {
    seconds: round(elapsedS),
    podsPerSecond: round(holdings.length / elapsedS),
    claimP50Ms: round(percentile(claimMs, 50)),
    claimP99Ms: round(percentile(claimMs, 99)),
    failures: Object.fromEntries(failures),
    duplicates: countDuplicates(holdings),
  };
}
