import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { dirname, join } from 'node:path';
import { encodeRequest } from '../../../node/agent/protocol.js';
import { SHIM_SOURCE_FILE } from '../../../node/installer/install.js';
import { argv } from '../../../packaging/cross.js';

/** The shim the build writes beside the fixture's plugin (with the `vpc-lease-cni-plugin` link it falls back to). */
export function shimBeside(cni: string): string {
  return join(dirname(cni), SHIM_SOURCE_FILE);
}

export interface AgentProcess {
  readonly pid: number;
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
  /** Everything the agent wrote to stderr so far (its own JSON log lines). */
  stderr(): string;
  /** SIGTERM: drain and exit. */
  stop(): Promise<number | null>;
  /** SIGKILL, as a rolling update's kill after the grace period or an OOM. */
  kill(): Promise<number | null>;
}

/**
 * Starts `cni agent --socket socket` and resolves once it listens (its "agent listening" line). `wrap` runs it
 * through another command (a chroot into an image's root), which must exec it so the pid stays the agent's.
 */
export function startAgent(
  cni: string,
  socket: string,
  env: Record<string, string>,
  wrap: readonly string[] = [],
  args: readonly string[] = [],
): Promise<AgentProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(...argv([...wrap, cni, 'agent', '--socket', socket, ...args]), {
      env,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
    const handle: AgentProcess = {
      pid: child.pid ?? -1,
      child,
      exited,
      stderr: () => err,
      stop: () => {
        child.kill('SIGTERM');
        return exited;
      },
      kill: () => {
        child.kill('SIGKILL');
        return exited;
      },
    };
    child.stderr?.on('data', (chunk: Buffer) => {
      err += chunk.toString('utf8');
      if (err.includes('"agent listening"')) resolve(handle);
    });
    child.once('error', reject);
    void exited.then((code) => reject(new Error(`the agent exited (${code}) before listening: ${err}`)));
  });
}

/** The first log line of the agent's with `msg`, parsed, once it is written (or an error when the agent exits). */
export function loggedLine(agent: AgentProcess, msg: string): Promise<Record<string, unknown>> {
  const find = () =>
    agent
      .stderr()
      .split('\n')
      .slice(0, -1) // only whole lines
      .find((l) => l.includes(`"msg":"${msg}"`));
  return new Promise((resolve, reject) => {
    const check = () => {
      const line = find();
      if (line === undefined) return false;
      agent.child.stderr?.off('data', check);
      resolve(JSON.parse(line) as Record<string, unknown>);
      return true;
    };
    if (check()) return;
    agent.child.stderr?.on('data', check);
    void agent.exited.then(() => {
      if (!check()) reject(new Error(`the agent exited without logging ${msg}: ${agent.stderr()}`));
    });
  });
}

/** The agent's metrics URL, from its "metrics listening" line (written once the socket listens). */
export async function metricsUrlOf(agent: AgentProcess): Promise<string> {
  return (await loggedLine(agent, 'metrics listening'))['url'] as string;
}

/** pids of the processes that wrote the plugin log's `msg` lines for `containerId` (who ran the call). */
export function loggedPids(logFile: string, msg: string, containerId: string): number[] {
  let text = '';
  try {
    text = readFileSync(logFile, 'utf8');
  } catch {
    return [];
  }
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as { msg?: string; containerId?: string; pid?: number })
    .filter((r) => r.msg === msg && r.containerId === containerId)
    .map((r) => r.pid ?? -1);
}

/**
 * Sends a request to the agent the way the shim does, but never falls back: resolves with the verdict byte and
 * whatever arrived before the connection closed (a test that kills the agent mid-call gets a partial answer).
 */
export function rawRequest(
  socket: string,
  env: Record<string, string>,
  stdin: string,
  onAccepted?: () => void,
): Promise<{ verdict: number | undefined; answer: Buffer; error?: string }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const conn = connect(socket, () => conn.write(encodeRequest({ env, stdin })));
    let accepted = false;
    conn.on('data', (c: Buffer) => {
      chunks.push(c);
      if (!accepted) {
        accepted = true;
        onAccepted?.();
      }
    });
    conn.on('error', (e) =>
      resolve({ verdict: undefined, answer: Buffer.alloc(0), error: (e as NodeJS.ErrnoException).code ?? e.message }),
    );
    conn.on('close', () => {
      const all = Buffer.concat(chunks);
      resolve({ verdict: all[0], answer: all.subarray(1) });
    });
  });
}
