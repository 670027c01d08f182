import { spawn } from 'node:child_process';
import type { PluginRun } from '../node/support/node-fixture.js';

/**
 * Runs a CNI plugin (or `node -e ''`) the way a runtime does: env, netconf on stdin, stdout parsed. Unlike the
 * node suite's helper it tolerates a child that exits without reading stdin (VERSION answers before reading
 * it): the EPIPE on its stdin is expected, not an error of the benchmark.
 */
export function execPlugin(
  file: string,
  args: string[],
  env: Record<string, string>,
  stdin: string,
): Promise<PluginRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { env, stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => err.push(c));
    child.stdin.on('error', () => undefined);
    child.on('error', reject);
    child.on('close', (code) => {
      const stdout = Buffer.concat(out).toString('utf8');
      let json: Record<string, unknown> | undefined;
      try {
        json = stdout.trim() ? (JSON.parse(stdout) as Record<string, unknown>) : undefined;
      } catch {
        json = undefined;
      }
      resolve({ code, stdout, stderr: Buffer.concat(err).toString('utf8'), json });
    });
    child.stdin.end(stdin);
  });
}
