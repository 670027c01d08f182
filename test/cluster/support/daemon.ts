import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';
import { createServer } from 'node:net';

/** A TCP port the kernel just handed out on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

/**
 * One long-running component of the cluster (etcd, kube-apiserver, kubelet …): its output in a log file and in
 * memory, so a failed wait can say what the component said last.
 */
export class Daemon {
  private child?: ChildProcess;
  private exited?: Promise<number | null>;
  private text = '';
  private file?: WriteStream;

  constructor(
    readonly name: string,
    private readonly argv: readonly string[],
    readonly logFile: string,
    private readonly env: NodeJS.ProcessEnv = process.env,
  ) {}

  start(): void {
    const [command, ...args] = this.argv;
    const child = spawn(command!, args, { env: this.env, stdio: ['ignore', 'pipe', 'pipe'] });
    this.file = createWriteStream(this.logFile, { flags: 'a' });
    const onData = (c: Buffer): void => {
      this.file?.write(c);
      this.text += c.toString('utf8');
      // Only the tail is kept in memory: a kubelet at --v=2 logs megabytes.
      if (this.text.length > 4_000_000) this.text = this.text.slice(-2_000_000);
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    this.exited = new Promise((resolve) =>
      child.on('close', (code) => {
        this.file?.end();
        resolve(code);
      }),
    );
    this.child = child;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  get log(): string {
    return this.text;
  }

  tail(chars = 3000): string {
    return this.text.slice(-chars);
  }

  /** SIGTERM (SIGKILL after `graceMs`) and wait for the exit. */
  async stop(graceMs = 10_000): Promise<void> {
    if (!this.child || !this.running) return;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child?.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}

/** Counts of the polls each wait took, reported by the suite: a slow path shows up as many polls, never as a pass. */
export const polls: Record<string, number> = {};

/**
 * Polls `probe` every `everyMs` until it returns a value; fails with `what`, the last error and `context()`
 * (a component's log tail) when `timeoutMs` passes or `alive()` turns false.
 */
export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  options: { timeoutMs?: number; everyMs?: number; context?: () => string; alive?: () => boolean } = {},
): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 120_000);
  let lastError: unknown;
  for (let i = 0; ; i++) {
    try {
      const value = await probe();
      if (value !== undefined) {
        if (i > 0) polls[what] = (polls[what] ?? 0) + i;
        return value;
      }
    } catch (err) {
      lastError = err;
    }
    const dead = options.alive && !options.alive();
    if (dead || Date.now() > deadline) {
      const why = dead ? 'the component exited' : `not within ${(options.timeoutMs ?? 120_000) / 1000} s`;
      const last = lastError instanceof Error ? ` (last error: ${lastError.message})` : '';
      throw new Error(`${what}: ${why}${last}\n${options.context?.() ?? ''}`);
    }
    await new Promise((r) => setTimeout(r, options.everyMs ?? 250));
  }
}
