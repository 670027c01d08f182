import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

/** How long strace may take to attach to every thread of the agent. */
const ATTACH_TIMEOUT_MS = 30_000;

/**
 * Every process a process and its descendants start while traced: strace follows forks (`-f`) and records each
 * execve, whatever the program and however it was spawned (a PATH search tries several paths in one child).
 */
export interface SpawnTrace {
  /** Stops tracing (the traced process goes on) and returns one line per process started: its first execve. */
  stop(): Promise<string[]>;
}

function tracedThreads(pid: number): { all: number; traced: number } {
  const tasks = readdirSync(`/proc/${pid}/task`);
  const traced = tasks.filter((t) => {
    const status = readFileSync(`/proc/${pid}/task/${t}/status`, 'utf8');
    return !/^TracerPid:\s+0$/m.test(status);
  });
  return { all: tasks.length, traced: traced.length };
}

/** Attaches strace to `pid` and resolves once every thread of it is traced. */
export async function traceSpawns(pid: number, log: string): Promise<SpawnTrace> {
  const strace: ChildProcess = spawn(
    'strace',
    ['-f', '-qq', '-e', 'trace=execve,execveat', '-e', 'signal=none', '-o', log, '-p', String(pid)],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  strace.stderr?.on('data', (c: Buffer) => {
    stderr += c.toString('utf8');
  });
  const exited = new Promise<void>((done) => strace.once('exit', () => done()));
  const deadline = Date.now() + ATTACH_TIMEOUT_MS;
  for (;;) {
    const { all, traced } = tracedThreads(pid);
    if (traced === all) break;
    if (strace.exitCode !== null || Date.now() > deadline) {
      strace.kill('SIGKILL');
      throw new Error(`strace did not attach to ${pid}: ${stderr}`);
    }
    await sleep(20);
  }
  return {
    async stop() {
      strace.kill('SIGINT'); // detaches and exits, leaving the traced process running
      await exited;
      const first = new Map<string, string>();
      for (const line of readFileSync(log, 'utf8').split('\n')) {
        const m = /^(\d+)\s+(execve(at)?\(.*)$/.exec(line);
        if (m && !first.has(m[1]!)) first.set(m[1]!, m[2]!);
      }
      return [...first.values()];
    },
  };
}
