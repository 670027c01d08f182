/**
 * Go test tools (containerd 2.x, crictl, …), pinned in versions.json, each built from its own small module
 * beside this file (go.mod + go.sum committed) into a per-machine cache keyed by the pin and the module's
 * checksums, so a machine builds each version once. `npm run tools` builds every tool (CI does it before
 * `npm test`); suites call `ensureTool` in their setup. `npm run tools -- --update` rewrites the modules after a
 * pin changes. Go builds test tools only, never product code.
 */
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface ToolPin {
  readonly module: string;
  /** The module version; versions.json is the one place it is written (go.mod must agree). */
  readonly version: string;
  /**
   * Main packages under the module ("." for the module root), each built into a binary named by its last path
   * element, or by `binaries` where that would be wrong (go names go.etcd.io/etcd/server/v3 "server").
   */
  readonly packages: readonly string[];
  /** Package → binary name, for packages whose last path element is not the binary's name. */
  readonly binaries?: Readonly<Record<string, string>>;
  /** Build with cgo, as the tool's own release does (kubelet is linked dynamically upstream). Default off. */
  readonly cgo?: boolean;
  /** `go build -ldflags`; `{version}` becomes the pin's version (kubelet reports it). */
  readonly ldflags?: string;
  /**
   * k8s.io/kubernetes only: its go.mod points its staging modules (k8s.io/api, …) at ./staging, which a
   * dependent cannot use, so the tool's go.mod replaces each with its published release of this version.
   */
  readonly stagingVersion?: string;
}

export const TOOLS_DIR = dirname(fileURLToPath(import.meta.url));

export function readPins(): Record<string, ToolPin> {
  return JSON.parse(readFileSync(join(TOOLS_DIR, 'versions.json'), 'utf8')) as Record<string, ToolPin>;
}

/** Explicit so a developer's own Go settings never change what gets built. */
export function goEnv(pin?: ToolPin): NodeJS.ProcessEnv {
  return {
    ...process.env,
    GOTOOLCHAIN: 'local',
    GOFLAGS: '-mod=readonly -trimpath -buildvcs=false',
    GOWORK: 'off',
    CGO_ENABLED: pin?.cgo ? '1' : '0',
  };
}

/** /var/cache for root (CI, the runtime suites); a user's own cache otherwise. VPC_LEASE_TOOLS_CACHE wins. */
export function toolCacheRoot(): string {
  const forced = process.env['VPC_LEASE_TOOLS_CACHE'];
  if (forced) return forced;
  return process.getuid?.() === 0 ? '/var/cache/vpc-lease-tools' : join(homedir(), '.cache', 'vpc-lease-tools');
}

function pinOf(name: string): ToolPin {
  const pin = readPins()[name];
  if (!pin) throw new Error(`no tool ${name} in test/tools/versions.json`);
  return pin;
}

/** The pin as the tool's go.mod requires it; a mismatch means the module was not updated after a pin change. */
export function checkModule(name: string, pin: ToolPin): void {
  const goMod = readFileSync(join(TOOLS_DIR, name, 'go.mod'), 'utf8');
  const required = new RegExp(`^\\s*(?:require\\s+)?${pin.module.replace(/[.]/g, '\\.')} (\\S+)`, 'm').exec(goMod)?.[1];
  if (required !== pin.version)
    throw new Error(
      `test/tools/${name}/go.mod requires ${pin.module} ${required ?? '(nothing)'} but versions.json pins ` +
        `${pin.version}: run \`npm run tools -- --update\``,
    );
}

/** <root>/<tool>-<version>-<hash of go.mod and go.sum>: a dependency change rebuilds even at the same pin. */
export function toolDir(name: string): string {
  const pin = pinOf(name);
  const hash = createHash('sha256');
  for (const f of ['go.mod', 'go.sum']) hash.update(readFileSync(join(TOOLS_DIR, name, f)));
  // Only tools that set them hash their build options, so adding the fields left other tools' caches valid.
  if (pin.cgo !== undefined || pin.ldflags !== undefined || pin.binaries !== undefined)
    hash.update(JSON.stringify([pin.cgo, pin.ldflags, ...(pin.binaries ? [pin.binaries] : [])]));
  return join(toolCacheRoot(), `${name}-${pin.version}-${hash.digest('hex').slice(0, 12)}`);
}

/** True when `go` can be run here. */
export function goAvailable(): boolean {
  try {
    execFileSync('go', ['version'], { stdio: 'ignore', env: goEnv() });
    return true;
  } catch {
    return false;
  }
}

function run(command: string, args: readonly string[], cwd: string, logFile: string, pin: ToolPin): Promise<void> {
  return new Promise((resolvePromise, reject) => {
    const log = openSync(logFile, 'a');
    const child = spawn(command, args, { cwd, env: goEnv(pin), stdio: ['ignore', log, log] });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code === 0) resolvePromise();
      else {
        const tail = readFileSync(logFile, 'utf8').slice(-3000);
        reject(new Error(`${command} ${args.join(' ')} (in ${cwd}) exited ${code}:\n${tail}`));
      }
    });
  });
}

/**
 * Builds the tool into its cache dir unless it is there, and returns that dir. The binaries are built into a
 * temp dir and renamed in, so a concurrent or interrupted build never leaves a half-filled cache entry.
 */
export async function ensureTool(name: string): Promise<string> {
  const pin = pinOf(name);
  checkModule(name, pin);
  const dir = toolDir(name);
  if (existsSync(dir)) return dir;
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  const logFile = `${tmp}.log`;
  try {
    const ldflags = pin.ldflags ? ['-ldflags', pin.ldflags.replaceAll('{version}', pin.version)] : [];
    const importPath = (p: string): string => (p === '.' ? pin.module : `${pin.module}/${p}`);
    const named = pin.packages.filter((p) => pin.binaries?.[p]);
    const plain = pin.packages.filter((p) => !pin.binaries?.[p]);
    if (plain.length > 0)
      await run(
        'go',
        ['build', ...ldflags, '-o', `${tmp}/`, ...plain.map(importPath)],
        join(TOOLS_DIR, name),
        logFile,
        pin,
      );
    for (const p of named)
      await run(
        'go',
        ['build', ...ldflags, '-o', join(tmp, pin.binaries![p]!), importPath(p)],
        join(TOOLS_DIR, name),
        logFile,
        pin,
      );
    try {
      renameSync(tmp, dir);
    } catch (err) {
      // Another process finished the same build first: keep its copy.
      if (!existsSync(dir)) throw err;
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
    rmSync(logFile, { force: true });
  }
  return dir;
}

/** The path of one built binary of a tool (building the tool if needed). */
export async function toolBinary(name: string, binary: string): Promise<string> {
  const path = join(await ensureTool(name), binary);
  if (!existsSync(path)) throw new Error(`${name} built no ${binary} (packages in versions.json?)`);
  return path;
}

/** Points every `k8s.io/X => k8s.io/X vN` replace of the tool's go.mod at `version`. */
function replaceStaging(cwd: string, version: string): void {
  const file = join(cwd, 'go.mod');
  const text = readFileSync(file, 'utf8').replace(/^(\s*(k8s\.io\/[\w.-]+) => \2) v\S+$/gm, `$1 ${version}`);
  writeFileSync(file, text);
}

/** Rewrites each tool's go.mod/go.sum to require exactly its pin (the proxy answers; run after a pin change). */
function updateModules(names: readonly string[]): void {
  for (const name of names) {
    const pin = pinOf(name);
    const cwd = join(TOOLS_DIR, name);
    const env = { ...goEnv(pin), GOFLAGS: '-mod=mod -buildvcs=false' };
    if (pin.stagingVersion) replaceStaging(cwd, pin.stagingVersion);
    const paths = pin.packages.map((p) => (p === '.' ? pin.module : `${pin.module}/${p}`));
    execFileSync('go', ['get', '-tool', ...paths.map((p) => `${p}@${pin.version}`)], {
      cwd,
      env,
      stdio: 'inherit',
    });
    execFileSync('go', ['mod', 'tidy'], { cwd, env, stdio: 'inherit' });
  }
}

/** `npm run tools [-- [--update] [tool …]]`: every tool, or only the ones named. */
async function main(): Promise<void> {
  const named = process.argv.slice(2).filter((a) => !a.startsWith('--'));
  const names = named.length > 0 ? named : Object.keys(readPins());
  if (process.argv.includes('--update')) updateModules(names);
  for (const name of names) {
    const started = Date.now();
    const cached = existsSync(toolDir(name));
    const dir = await ensureTool(name);
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    console.log(`tools: ${name} ${readPins()[name]!.version} ${cached ? 'cached' : `built in ${seconds} s`}: ${dir}`);
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  });
}
