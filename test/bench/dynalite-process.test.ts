import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

/** The process's state letter from /proc (R, S, Z, …), or undefined once it is reaped. */
function stateOf(pid: number): string | undefined {
  try {
    return /^\d+ \(.*\) (\S)/.exec(readFileSync(`/proc/${pid}/stat`, 'utf8'))?.[1];
  } catch {
    return undefined;
  }
}

const alive = (pid: number): boolean => {
  const state = stateOf(pid);
  return state !== undefined && state !== 'Z' && state !== 'X';
};

describe('Function: startDynaliteProcess', () => {
  let parent: ChildProcess | undefined;
  let serverPid: number | undefined;
  afterEach(() => {
    parent?.kill('SIGKILL');
    // Only ours: a server this test started and that is still running (the defence broken).
    if (serverPid !== undefined && alive(serverPid)) process.kill(serverPid, 'SIGKILL');
    parent = undefined;
    serverPid = undefined;
  });

  it('ends its server when the process that started it is killed with SIGKILL', async () => {
    // Prepare: a parent that starts the server, says where it is, then idles until killed.
    const module = resolve('test/bench/dynalite-process.ts');
    const script = `
      import { startDynaliteProcess } from ${JSON.stringify(module)};
      const d = await startDynaliteProcess('vpc-lease', 'us-east-1');
      process.stdout.write(JSON.stringify({ pid: d.pid, port: Number(new URL(d.endpoint).port) }) + '\\n');
      setInterval(() => {}, 60_000);`;
    parent = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    parent.stdout!.setEncoding('utf8');
    const started = new Promise<{ pid: number; port: number }>((done, fail) => {
      parent!.once('exit', (code) => fail(new Error(`the parent exited with ${code} before the server started`)));
      parent!.stdout!.on('data', (chunk: string) => {
        out += chunk;
        if (out.includes('\n')) done(JSON.parse(out) as { pid: number; port: number });
      });
    });
    const { pid, port } = await started;
    serverPid = pid;
    expect(alive(pid)).toBe(true);
    // A connection to the server: the kernel closes it when the server's process exits, whatever ends it.
    const socket = connect(port, '127.0.0.1');
    await once(socket, 'connect');
    const closed = once(socket, 'close');

    // Act
    parent.kill('SIGKILL');
    await once(parent, 'exit');
    await closed;

    // Assess: the server's descriptors close as it exits; it leaves running a moment later (counted, not hidden).
    let polls = 0;
    while (alive(pid)) {
      polls += 1;
      await new Promise((r) => setTimeout(r, 10));
    }
    if (polls > 0) console.info(`the server left running ${polls} poll(s) after its socket closed`);
    expect(stateOf(pid) ?? 'reaped').toMatch(/^(Z|X|reaped)$/);
  }, 60_000);
});
