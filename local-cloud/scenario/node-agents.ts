import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { HostNet } from './host-net.js';

/**
 * One simulated node's resident agent (`vpc-lease-cni agent`), as the DaemonSet runs it on a node: the shim
 * forwards each pod call to its socket. Every node gets its own socket and its own metrics port on loopback
 * (port 0: the kernel picks a free one, so nodes, runs and other programs never collide on 61680).
 */
export interface NodeAgent {
  readonly instanceId: string;
  readonly socketPath: string;
  /** Where the agent serves /metrics (what `--keep` records as the node's `metricsUrl`). */
  readonly metricsUrl: string;
  readonly pid: number;
  /** SIGTERM: the agent drains its calls in flight and exits. */
  stop(): Promise<void>;
}

/** What the agent counted, from its /metrics: calls by command, and by the path that ran them. */
export interface AgentCounts {
  readonly add: number;
  readonly del: number;
  /** Calls the agent itself ran. */
  readonly viaAgent: number;
  /** Calls the shim left to the full plugin (agent unreachable or too slow), drained from the fallback records. */
  readonly fallback: number;
}

/** One node's agent as the report shows it: where its metrics were, and what it counted. */
export interface AgentLine extends AgentCounts {
  readonly instanceId: string;
  readonly metricsUrl: string;
  /** Still running (a terminated node's agent was stopped; its counts are from just before). */
  readonly running: boolean;
  /** What the scenario sent to this node (the runtime's side of the same calls). */
  readonly sent: { readonly add: number; readonly del: number };
}

/**
 * Starts the agent and resolves once it serves both its socket and its metrics. Its pid goes to `hostNet`, whose
 * cleanup and reaper kill it with the run's namespaces however the run ends: it must not outlive them.
 */
export function startNodeAgent(binary: string, instanceId: string, dir: string, hostNet: HostNet): Promise<NodeAgent> {
  const runDir = join(dir, 'run');
  mkdirSync(runDir, { recursive: true, mode: 0o700 });
  const socketPath = join(runDir, 'agent.sock');
  const child: ChildProcess = spawn(binary, ['agent', '--socket', socketPath], {
    env: {
      PATH: process.env['PATH'] ?? '/usr/sbin:/usr/bin:/sbin:/bin',
      VPC_LEASE_TEST_MODE: '1',
      VPC_LEASE_METRICS_ADDRESS: '127.0.0.1:0',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const pid = child.pid;
  if (pid !== undefined) hostNet.adoptProcess(pid);
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      if (pid !== undefined) hostNet.releaseProcess(pid);
      resolve(code);
    }),
  );
  return new Promise((resolve, reject) => {
    let err = '';
    let listening = false;
    let metricsUrl: string | undefined;
    child.stderr?.on('data', (chunk: Buffer) => {
      err += chunk.toString('utf8');
      const lines = err.split('\n');
      err = lines.pop() ?? '';
      for (const line of lines) {
        const record = parseLine(line);
        if (record?.['msg'] === 'agent listening') listening = true;
        if (record?.['msg'] === 'metrics listening') metricsUrl = String(record['url']);
        if (record?.['msg'] === 'metrics server failed to start')
          reject(new Error(`agent of ${instanceId}: no metrics: ${String(record['error'])}`));
      }
      if (listening && metricsUrl)
        resolve({
          instanceId,
          socketPath,
          metricsUrl,
          pid: pid ?? -1,
          stop: async () => {
            child.kill('SIGTERM');
            await exited;
          },
        });
    });
    child.once('error', reject);
    void exited.then((code) => reject(new Error(`the agent of ${instanceId} exited (${code}) before listening`)));
  });
}

function parseLine(line: string): Record<string, unknown> | undefined {
  try {
    return JSON.parse(line) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

/** Scrapes the agent's counters (Prometheus text format: `name{labels} value` lines). */
export async function scrapeAgentCounts(metricsUrl: string): Promise<AgentCounts> {
  const text = await (await fetch(metricsUrl, { signal: AbortSignal.timeout(5000) })).text();
  const counts = { add: 0, del: 0, viaAgent: 0, fallback: 0 };
  for (const line of text.split('\n')) {
    const m = /^(vpc_lease_[a-z_]+)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const [, name, labels = '', raw] = m;
    const value = Number(raw);
    if (name === 'vpc_lease_cni_requests_total') {
      if (labels.includes('command="ADD"')) counts.add += value;
      if (labels.includes('command="DEL"')) counts.del += value;
    } else if (name === 'vpc_lease_cni_request_duration_seconds_count' && labels.includes('path="agent"'))
      counts.viaAgent += value;
    else if (name === 'vpc_lease_fallback_executions_total') counts.fallback += value;
  }
  return counts;
}
