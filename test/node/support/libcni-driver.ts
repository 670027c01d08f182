import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/**
 * The libcni test driver (test/tools/libcni): one source, built against Debian's libcni 1.1.2 (go.mod: what
 * containerd 1.6/1.7 embed) or against libcni 1.3.0 (go.libcni12.mod, tag libcni12: containerd 2, CRI-O). Built
 * once per machine through the Go module proxy and cached by the hash of the module's files.
 */
export type LibcniFlavour = '1.1' | '1.3';

const MODULE_DIR = join(import.meta.dirname, '..', '..', 'tools', 'libcni');

/** Why the driver cannot be built here, or undefined. In CI a missing Go fails the suite (see capabilities.ts). */
export function goMissing(): string | undefined {
  try {
    execFileSync('go', ['version'], { stdio: 'ignore' });
    return undefined;
  } catch {
    const reason = 'no Go toolchain (needed to build the libcni test driver)';
    if (process.env['CI'] === 'true') throw new Error(`CI must run this suite, but: ${reason}`);
    process.stderr.write(`skipping: ${reason}\n`);
    return reason;
  }
}

export function buildLibcniDriver(flavour: LibcniFlavour): string {
  const hash = createHash('sha256');
  for (const name of readdirSync(MODULE_DIR).sort()) hash.update(name).update(readFileSync(join(MODULE_DIR, name)));
  const cacheDir = join(process.env['XDG_CACHE_HOME'] ?? join(homedir(), '.cache'), 'vpc-lease', 'test-tools');
  const out = join(cacheDir, `libcni-driver-${flavour}-${hash.digest('hex').slice(0, 16)}`);
  if (existsSync(out)) return out;
  mkdirSync(cacheDir, { recursive: true });
  const tmp = `${out}.${process.pid}.tmp`;
  const args = flavour === '1.1' ? [] : ['-modfile=go.libcni12.mod', '-tags', 'libcni12'];
  execFileSync('go', ['build', ...args, '-o', tmp, '.'], { cwd: MODULE_DIR, stdio: ['ignore', 'ignore', 'pipe'] });
  renameSync(tmp, out);
  return out;
}
