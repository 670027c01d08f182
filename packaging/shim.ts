/**
 * The shim the runtime executes (node/shim/shim.c): a static C executable, built with this machine's gcc or,
 * for another CPU, Debian's gcc-<triplet> (crossCompilers) and that CPU's static glibc (libc6-dev-<arch>-cross).
 * Static, so it needs nothing from the host; it forwards to the agent and otherwise execs the plugin beside it.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PLUGIN_EXECUTABLE, SHIM_SOURCE_FILE } from '../node/installer/install.js';
import { ARCH_INFO, type Arch, crossCompilers, elfMachine, hostArch } from './cross.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The build's name for the shim; the installer puts it in the CNI bin dir under the conflist's `type`. */
export const SHIM_BUILD_FILE = SHIM_SOURCE_FILE;

/**
 * Compiles the shim into `outDir/vpc-lease-cni-shim` for `arch` and returns its path. Beside it, a link
 * `vpc-lease-cni-plugin` → `vpc-lease-cni` gives the build the installed layout, so its shim falls back in place.
 */
export function buildShim(outDir: string, arch: Arch = hostArch()): string {
  mkdirSync(outDir, { recursive: true });
  const out = join(outDir, SHIM_BUILD_FILE);
  const tmp = `${out}.${process.pid}.tmp`;
  const cc = crossCompilers(arch)['CC'] ?? 'gcc';
  const source = join(root, 'node', 'shim', 'shim.c');
  execFileSync(cc, ['-Os', '-static', '-s', '-Wall', '-Wextra', '-Werror', '-o', tmp, source], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const machine = elfMachine(readFileSync(tmp).subarray(0, 20));
  if (machine !== ARCH_INFO[arch].elfMachine) throw new Error(`${tmp} is ELF machine ${machine}, not ${arch}'s`);
  chmodSync(tmp, 0o755);
  renameSync(tmp, out);
  rmSync(join(outDir, PLUGIN_EXECUTABLE), { force: true });
  symlinkSync('vpc-lease-cni', join(outDir, PLUGIN_EXECUTABLE));
  return out;
}
