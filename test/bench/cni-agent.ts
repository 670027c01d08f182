import { closeSync, mkdtempSync, openSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { installPodMarks, removePodMarks } from '../../node/datapath/pod-marks.js';
import { AF_INET } from '../../node/datapath/rtnl.js';
import { type AgentProcess, shimBeside, startAgent } from '../node/support/agent-process.js';
import type { PluginRun } from '../node/support/node-fixture.js';
import type { CniBenchNode } from './cni-node.js';
import { expectOk } from './cni-node.js';
import { childrenCpuMs } from './cpu.js';
import { execPlugin } from './exec.js';
import { phaseStepMediansMs } from './plugin-log.js';
import { elapsedMs, round, summarize } from './stats.js';

const CLOCK_TICKS_PER_S = 100; // USER_HZ

/**
 * user + system CPU of a live process and of the children it reaped (its iptables runs), from /proc/<pid>/stat
 * (fields 14 to 17).
 */
export function processCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = [11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i]), 0);
  return (ticks * 1000) / CLOCK_TICKS_PER_S;
}

/**
 * Where calls through the agent `pid` spend their time: its phase marks for ADD and DEL (each step's median, from
 * the log lines it wrote), and `outsideHandler` — the call's p50 latency less the handler's median total: the
 * shim's start, the socket, the JSON and the lock wait before the first mark.
 */
export function agentPhaseProfile(
  logFile: string,
  pid: number,
  addMs: readonly number[],
  delMs: readonly number[],
): { add: Record<string, number>; del: Record<string, number>; biggest: Record<string, unknown> } {
  const of = (message: string, latency: readonly number[]) => {
    const steps = phaseStepMediansMs(logFile, message, pid);
    return { ...steps, outsideHandler: round(summarize(latency).p50Ms - (steps['total'] ?? 0)) };
  };
  const add = of('added', addMs);
  const del = of('deleted', delMs);
  const all = [
    ...Object.entries(add).map(([phase, ms]) => ({ command: 'ADD', phase, p50Ms: ms })),
    ...Object.entries(del).map(([phase, ms]) => ({ command: 'DEL', phase, p50Ms: ms })),
  ].filter((p) => p.phase !== 'total');
  const biggest = all.reduce((a, b) => (b.p50Ms > a.p50Ms ? b : a), { command: '', phase: '', p50Ms: -1 });
  return { add, del, biggest };
}

/** VmHWM: the process's peak resident set so far, in KiB. */
function peakRssKibOf(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmHWM:'));
  return Number(line?.split(/\s+/)[1] ?? Number.NaN);
}

/**
 * The shim's two paths beside the plugin and the Go chain in `npm run bench -- cni`: "through the agent" (the
 * shim forwards to a resident agent started from the same executable) and "fallback" (no agent listening: the
 * shim execs the full plugin). Blocks join the bench's shuffled rounds, so load hits every row alike.
 */
export class AgentBench {
  private readonly samples = {
    agentAdd: [] as number[],
    agentDel: [] as number[],
    fbAdd: [] as number[],
    fbDel: [] as number[],
  };
  private constructor(
    private readonly node: CniBenchNode,
    private readonly agent: AgentProcess,
    private readonly shim: string,
    private readonly socket: string,
  ) {}

  static async start(node: CniBenchNode): Promise<AgentBench> {
    const socket = join(mkdtempSync(join(node.fixture.dir, 'agent-')), 'run', 'agent.sock');
    const agent = await startAgent(node.binary, socket, { PATH: process.env['PATH'] ?? '/usr/bin:/bin' });
    return new AgentBench(node, agent, shimBeside(node.binary), socket);
  }

  private runShim(socket: string, command: string, ids: { netns: string; containerId: string }, conf: object) {
    const env = { ...this.node.env(command, ids), VPC_LEASE_AGENT_SOCKET: socket };
    return execPlugin(this.shim, [], env, JSON.stringify(conf));
  }

  /** One call through the shim to the resident agent (the runtime's path). */
  viaAgent(command: string, ids: { netns: string; containerId: string }, conf: object): Promise<PluginRun> {
    return this.runShim(this.socket, command, ids, conf);
  }

  private async timed(what: string, run: () => Promise<PluginRun>): Promise<number> {
    const start = process.hrtime.bigint();
    const result = await run();
    const ms = elapsedMs(start);
    expectOk(what, result);
    return ms;
  }

  /** The two pod blocks (ADD then DEL of one pod) for the bench's rounds. */
  blocks(netns: string, conf: object): Record<string, (i: number) => Promise<void>> {
    const absent = join(dirname(this.socket), 'absent.sock');
    const pod = (socket: string, prefix: string, add: number[], del: number[]) => async (i: number) => {
      const ids = { netns, containerId: `${prefix}${i}` };
      add.push(await this.timed(`${prefix} ADD`, () => this.runShim(socket, 'ADD', ids, conf)));
      del.push(await this.timed(`${prefix} DEL`, () => this.runShim(socket, 'DEL', ids, conf)));
    };
    return {
      agentPod: pod(this.socket, 'agent', this.samples.agentAdd, this.samples.agentDel),
      fallbackPod: pod(absent, 'fallback', this.samples.fbAdd, this.samples.fbDel),
    };
  }

  /** Forgets the warm-up's samples. */
  resetSamples(): void {
    for (const list of Object.values(this.samples)) list.length = 0;
  }

  /** CPU per pod (ADD + DEL): the shims' (reaped children) plus the agent's own, over `pods` pods. */
  async cpuMsPerPod(netns: string, conf: object, pods: number): Promise<{ agent: number; fallback: number }> {
    const agentBefore = processCpuMs(this.agent.pid);
    const childrenBefore = childrenCpuMs();
    for (let i = 0; i < pods; i++) {
      const ids = { netns, containerId: `agentcpu${i}` };
      expectOk('agent cpu ADD', await this.runShim(this.socket, 'ADD', ids, conf));
      expectOk('agent cpu DEL', await this.runShim(this.socket, 'DEL', ids, conf));
    }
    const agent = (childrenCpuMs() - childrenBefore + processCpuMs(this.agent.pid) - agentBefore) / pods;
    const absent = join(dirname(this.socket), 'absent.sock');
    const fbBefore = childrenCpuMs();
    for (let i = 0; i < pods; i++) {
      const ids = { netns, containerId: `fbcpu${i}` };
      expectOk('fallback cpu ADD', await this.runShim(absent, 'ADD', ids, conf));
      expectOk('fallback cpu DEL', await this.runShim(absent, 'DEL', ids, conf));
    }
    return { agent: round(agent), fallback: round((childrenCpuMs() - fbBefore) / pods) };
  }

  phases(): { add: Record<string, number>; del: Record<string, number>; biggest: Record<string, unknown> } {
    return agentPhaseProfile(this.node.fixture.logFile, this.agent.pid, this.samples.agentAdd, this.samples.agentDel);
  }

  /** The pod-side marks each ADD installs and each DEL removes, on their own: one nf_tables transaction each. */
  async podMarksMs(netns: string, runs = 10): Promise<{ install: number; remove: number }> {
    const fd = openSync(netns, 'r');
    const install: number[] = [];
    const remove: number[] = [];
    try {
      for (let i = 0; i < runs; i++) {
        let start = process.hrtime.bigint();
        await installPodMarks(fd, 'vh-benchipt', [AF_INET]);
        install.push(elapsedMs(start));
        start = process.hrtime.bigint();
        await removePodMarks(fd, 'vh-benchipt', [AF_INET]);
        remove.push(elapsedMs(start));
      }
    } finally {
      closeSync(fd);
    }
    return { install: summarize(install).p50Ms, remove: summarize(remove).p50Ms };
  }

  figures(): Record<string, unknown> {
    const phases = this.phases();
    return {
      latencyMs: {
        agentAdd: summarize(this.samples.agentAdd),
        agentDel: summarize(this.samples.agentDel),
        fallbackAdd: summarize(this.samples.fbAdd),
        fallbackDel: summarize(this.samples.fbDel),
      },
      agentAddPhasesMs: phases.add,
      agentDelPhasesMs: phases.del,
      agentBiggestRemainingCost: phases.biggest,
      agentPeakRssKib: peakRssKibOf(this.agent.pid),
      shimBytes: statSync(this.shim).size,
      shimKib: round(statSync(this.shim).size / 1024),
    };
  }

  async close(): Promise<void> {
    await this.agent.stop();
  }
}
