import { spawn } from 'node:child_process';

/** What a runtime sees of one plugin call. */
export interface PluginRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** stdout parsed, when it is JSON. */
  readonly json: Record<string, unknown> | undefined;
}

/**
 * Runs a CNI plugin (or `node -e ''`) exactly as a runtime does: a separate process, CNI_* in the environment,
 * the netconf on stdin, stdout parsed. Used by the node suite, the benchmarks and the VM guest (plain node, no
 * vitest), so it imports nothing else. A child that exits without reading stdin (VERSION answers before reading
 * it) makes our write fail with EPIPE: expected, not an error of the caller.
 */
export function runPluginProcess(
  file: string,
  args: readonly string[],
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

/** The fixed script: every path before `--` gets /dev/null bound over it, then the rest is exec'd. */
const MASK_AND_EXEC = 'while [ "$1" != -- ]; do mount --bind /dev/null "$1"; shift; done; shift; exec "$@"';

/**
 * Runs `file args` like runPluginProcess, but in a private mount namespace where each of `masked` (the Node
 * binaries) is /dev/null and PATH holds none: a host without Node.js, as on AL2023 or Bottlerocket. Paths and
 * arguments reach the script only as positional parameters.
 */
export function runWithoutNode(
  masked: readonly string[],
  file: string,
  args: readonly string[],
  env: Record<string, string>,
  stdin: string,
): Promise<PluginRun> {
  return runPluginProcess(
    'unshare',
    [
      '--mount',
      '--propagation',
      'private',
      '--',
      'sh',
      '-c',
      MASK_AND_EXEC,
      'sh',
      ...new Set(masked),
      '--',
      file,
      ...args,
    ],
    { ...env, PATH: '/usr/sbin:/usr/bin:/sbin:/bin' },
    stdin,
  );
}
