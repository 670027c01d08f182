import { mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { scrapeAgentCounts } from '../../local-cloud/scenario/node-agents.js';
import { type AgentProcess, metricsUrlOf, shimBeside, startAgent } from '../node/support/agent-process.js';
import type { PluginRun } from '../node/support/node-fixture.js';
import { agentPhaseProfile, processCpuMs } from './cni-agent.js';
import type { Attachment, CniBenchNode } from './cni-node.js';
import { childrenCpuMs, selfCpuMs } from './cpu.js';
import { execPlugin } from './exec.js';
import type { Holding } from './holdings.js';
import { elapsedMs, percentile, round, seededRandom, shuffle } from './stats.js';

/**
 * One way pods are started in the churn bench: through this build's agent, through an older build's agent
 * (`--baseline DIR`), the per-call plugin, or the Go reference chain (macvlan + host-local). All run the same
 * loops in turns on one machine, so their ratios hold while the load moves.
 */
export interface ChurnSubject {
  readonly name: string;
  /** Its calls check and hold our leases (not the Go chain's host-local addresses). */
  readonly leases: boolean;
  run(command: 'ADD' | 'DEL', ids: Attachment): Promise<PluginRun>;
  /** CPU of its resident process (and the children it reaped) so far; 0 without one. */
  residentCpuMs(): number;
  /** Calls its agent served itself, per its metrics; undefined without an agent. */
  viaAgent(): Promise<number | undefined>;
  /** Its agent's event-loop delay histogram so far (cumulative counts by upper bound); undefined without one. */
  eventLoopDelay(): Promise<DelayBuckets | undefined>;
  /** Where its agent's calls spend their time (the agent's phase marks); undefined without an agent. */
  profile(addMs: readonly number[], delMs: readonly number[]): Record<string, unknown> | undefined;
  close(): Promise<void>;
}

/** A Prometheus histogram's cumulative counts by upper bound (seconds), `+Inf` last as Infinity. */
export interface DelayBuckets {
  readonly bounds: number[];
  readonly counts: number[];
}

async function scrapeEventLoopDelay(metricsUrl: string): Promise<DelayBuckets> {
  const text = await (await fetch(metricsUrl, { signal: AbortSignal.timeout(5000) })).text();
  const bounds: number[] = [];
  const counts: number[] = [];
  for (const m of text.matchAll(/^vpc_lease_agent_event_loop_delay_seconds_bucket\{le="([^"]+)"\} (\S+)$/gm)) {
    bounds.push(m[1] === '+Inf' ? Number.POSITIVE_INFINITY : Number(m[1]));
    counts.push(Number(m[2]));
  }
  return { bounds, counts };
}

/** The quantile as Prometheus's histogram_quantile gives it: linear within the bucket it falls in. */
export function bucketQuantile(b: DelayBuckets, q: number): number | undefined {
  const total = b.counts.at(-1) ?? 0;
  if (total === 0) return undefined;
  const rank = q * total;
  const i = b.counts.findIndex((c) => c >= rank);
  const upper = b.bounds[i]!;
  const lower = i === 0 ? 0 : b.bounds[i - 1]!;
  if (!Number.isFinite(upper)) return lower;
  const below = i === 0 ? 0 : b.counts[i - 1]!;
  return lower + ((upper - lower) * (rank - below)) / Math.max(1, b.counts[i]! - below);
}

export interface SubjectStats {
  cycles: number;
  seconds: number;
  /** Processes this bench reaped (shims, plugins) plus the resident agent's own, over the subject's turns. */
  cpuMs: number;
  /** dynalite, the proxies and this driver, over the subject's turns. */
  localServicesCpuMs: number;
  addMs: number[];
  delMs: number[];
  failures: string[];
  holdings: Holding[];
  /** Pods whose DEL failed: a kubelet retries DEL until it succeeds, and so does the bench after the turns. */
  failedDels: { netns: string; containerId: string }[];
  /** Pods whose DEL succeeded (at last), and pods whose ADD failed: the lost-lease accounting sorts by them. */
  delSucceeded: Set<string>;
  failedAdds: Set<string>;
  /** Its agent's event-loop delay samples taken during its turns only (bucket deltas). */
  loopDelay?: DelayBuckets;
}

/** A subject through a resident agent started from `binary` (its shim beside it). */
export async function agentSubject(
  name: string,
  node: CniBenchNode,
  binary: string,
  confs: { add: Record<string, unknown>; del: Record<string, unknown> },
): Promise<ChurnSubject> {
  const socket = join(mkdtempSync(join(node.fixture.dir, 'agent-')), 'run', 'agent.sock');
  // Its own metrics port (0: the kernel picks), so the bench never collides with another agent on 61680.
  // VPC_LEASE_BENCH_PROFILE_DIR: each agent writes a V8 CPU profile there when it stops (where its CPU goes).
  const profileDir = process.env['VPC_LEASE_BENCH_PROFILE_DIR'];
  const agent: AgentProcess = await startAgent(binary, socket, {
    PATH: process.env['PATH'] ?? '/usr/bin:/bin',
    VPC_LEASE_METRICS_ADDRESS: '127.0.0.1:0',
    ...(profileDir ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${join(profileDir, name)}` } : {}),
  });
  const metricsUrl = await metricsUrlOf(agent);
  const shim = shimBeside(binary);
  return {
    name,
    leases: true,
    run: (command, ids) =>
      execPlugin(
        shim,
        [],
        { ...node.env(command, ids), VPC_LEASE_AGENT_SOCKET: socket },
        JSON.stringify(command === 'ADD' ? confs.add : confs.del),
      ),
    residentCpuMs: () => processCpuMs(agent.pid),
    viaAgent: async () => (await scrapeAgentCounts(metricsUrl)).viaAgent,
    eventLoopDelay: () => scrapeEventLoopDelay(metricsUrl),
    profile: (addMs, delMs) => agentPhaseProfile(node.fixture.logFile, agent.pid, addMs, delMs),
    close: async () => {
      await agent.stop();
    },
  };
}

/** The plugin executed per call, as before #22 (and as the shim's fallback runs it). */
export function pluginSubject(
  node: CniBenchNode,
  confs: { add: Record<string, unknown>; del: Record<string, unknown> },
): ChurnSubject {
  return {
    name: 'plugin',
    leases: true,
    run: (command, ids) =>
      execPlugin(node.binary, [], node.env(command, ids), JSON.stringify(command === 'ADD' ? confs.add : confs.del)),
    residentCpuMs: () => 0,
    viaAgent: async () => undefined,
    eventLoopDelay: async () => undefined,
    profile: () => undefined,
    close: async () => undefined,
  };
}

/** The Go reference chain in the same pod namespaces: macvlan on the fixture's ENI link, host-local IPAM. */
export function goSubject(node: CniBenchNode): ChurnSubject {
  const conf = node.goNetconf();
  return {
    name: 'goChain',
    leases: false,
    run: (command, ids) =>
      node.runGo(command, { containerId: ids.containerId ?? 'c0', netns: ids.netns ?? '', ifName: 'eth0' }, conf),
    residentCpuMs: () => 0,
    viaAgent: async () => undefined,
    eventLoopDelay: async () => undefined,
    profile: () => undefined,
    close: async () => undefined,
  };
}

export function emptyStats(): SubjectStats {
  return {
    cycles: 0,
    seconds: 0,
    cpuMs: 0,
    localServicesCpuMs: 0,
    addMs: [],
    delMs: [],
    failures: [],
    holdings: [],
    failedDels: [],
    delSucceeded: new Set(),
    failedAdds: new Set(),
  };
}

/**
 * Runs every subject for `turns` turns of `turnSeconds` each, in a seeded shuffled order per round: `loops`
 * kubelet-like workers, each ADD → DEL → ADD … in its own netns. A turn ends when every loop finished the cycle
 * it was in, so no pod of one subject is alive while the next starts.
 */
export async function runTurns(
  subjects: readonly ChurnSubject[],
  netnses: readonly string[],
  options: { readonly turns: number; readonly turnSeconds: number; readonly seed: number },
): Promise<Map<string, SubjectStats>> {
  const stats = new Map(subjects.map((s) => [s.name, emptyStats()]));
  const random = seededRandom(options.seed);
  for (let turn = 0; turn < options.turns; turn++) {
    for (const subject of shuffle(subjects, random)) {
      const into = stats.get(subject.name)!;
      const loop0 = await subject.eventLoopDelay();
      const cpu0 = childrenCpuMs() + subject.residentCpuMs();
      const self0 = selfCpuMs();
      const t0 = performance.now();
      const deadline = t0 + options.turnSeconds * 1000;
      await Promise.all(netnses.map((netns, index) => loop(subject, netns, `${turn}-${index}`, deadline, into)));
      into.seconds += (performance.now() - t0) / 1000;
      into.cpuMs += childrenCpuMs() + subject.residentCpuMs() - cpu0;
      into.localServicesCpuMs += selfCpuMs() - self0;
      const loop1 = await subject.eventLoopDelay();
      if (loop0 && loop1) into.loopDelay = addBuckets(into.loopDelay, loop1, loop0);
    }
  }
  return stats;
}

/** `sum` plus (`after` − `before`), bucket by bucket. */
function addBuckets(sum: DelayBuckets | undefined, after: DelayBuckets, before: DelayBuckets): DelayBuckets {
  return {
    bounds: after.bounds,
    counts: after.counts.map((c, i) => (sum?.counts[i] ?? 0) + c - (before.counts[i] ?? 0)),
  };
}

async function loop(
  subject: ChurnSubject,
  netns: string,
  tag: string,
  deadlineMs: number,
  into: SubjectStats,
): Promise<void> {
  for (let i = 0; performance.now() < deadlineMs; i++) {
    const containerId = `${subject.name}-${tag}-${i}`;
    const addStart = process.hrtime.bigint();
    const add = await subject.run('ADD', { netns, containerId });
    const addEnd = performance.now();
    into.addMs.push(elapsedMs(addStart));
    const ip = (add.json?.['ips'] as { address: string }[] | undefined)?.[0]?.address.split('/')[0];
    if (add.code !== 0 || !ip) {
      into.failures.push(`${subject.name} ADD: ${add.stdout.trim()}`);
      into.failedAdds.add(containerId);
    }
    const delStart = process.hrtime.bigint();
    const delStartMs = performance.now();
    const del = await subject.run('DEL', { netns, containerId });
    into.delMs.push(elapsedMs(delStart));
    if (del.code !== 0) {
      into.failures.push(`${subject.name} DEL: ${del.stdout.trim()}`);
      into.failedDels.push({ netns, containerId });
    } else into.delSucceeded.add(containerId);
    if (ip && subject.leases) into.holdings.push({ ip, pod: containerId, fromMs: addEnd, untilMs: delStartMs });
    if (add.code === 0 && del.code === 0) into.cycles += 1;
  }
}

/** One subject's figures for the JSON line. */
export function subjectFigures(stats: SubjectStats, cores: number): Record<string, unknown> {
  const adds = Math.max(1, stats.addMs.length);
  const cpuMsPerPod = stats.cpuMs / adds;
  return {
    pods: stats.cycles,
    seconds: round(stats.seconds),
    podsPerSecond: round(stats.cycles / Math.max(0.001, stats.seconds)),
    addP50Ms: round(percentile(stats.addMs, 50)),
    addP99Ms: round(percentile(stats.addMs, 99)),
    delP50Ms: round(percentile(stats.delMs, 50)),
    delP99Ms: round(percentile(stats.delMs, 99)),
    /** ADD + DEL: the shims or plugin processes, plus the agent's own CPU and its iptables children's. */
    cpuMsPerPod: round(cpuMsPerPod),
    localServicesCpuMsPerPod: round(stats.localServicesCpuMs / adds),
    /** What the subject's own CPU allows on an idle machine of this many cores (local services left out). */
    cpuBoundPodsPerSecondIdle: round((cores * 1000) / Math.max(0.001, cpuMsPerPod)),
    failures: stats.failures.length,
    ...(stats.failures[0] ? { firstFailure: stats.failures[0] } : {}),
    ...(stats.loopDelay ? { eventLoopDelayMs: loopDelayFigures(stats.loopDelay) } : {}),
  };
}

/** The agent's event-loop delay over the subject's turns: p50, p99 and the samples taken (a 10 ms timer's). */
function loopDelayFigures(b: DelayBuckets): Record<string, number | undefined> {
  const ms = (q: number): number | undefined => {
    const s = bucketQuantile(b, q);
    return s === undefined ? undefined : round(s * 1000);
  };
  return { p50: ms(0.5), p99: ms(0.99), samples: b.counts.at(-1) ?? 0 };
}
