/**
 * `npm run build`: esbuild bundles into dist/.
 * - dist/vpc-lease-cni: the executable the runtime calls (a small launcher with a shebang) and beside it the
 *   plugin bundle vpc-lease-cni.js (CommonJS, run through V8's code cache) and its native parts —
 *   netlink.node (the `netlink` package's prebuilt binding) and vpc_lease_netns.node (our setns addon, built
 *   here with node-gyp). No AWS SDK may end up in it: the build fails if one does.
 * - dist/lambdas/<name>/index.mjs: one ESM bundle per `lambdas/<name>/handler.ts`.
 */
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type Plugin } from 'esbuild';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const dist = join(root, 'dist');

/** npm ships node-gyp; find it next to the npm that runs this Node. */
function nodeGypPath(): string {
  const candidates = [
    process.env['NODE_GYP'],
    join(
      dirname(process.execPath),
      '..',
      'lib',
      'node_modules',
      'npm',
      'node_modules',
      'node-gyp',
      'bin',
      'node-gyp.js',
    ),
  ];
  try {
    const npm = execFileSync('sh', ['-c', 'readlink -f "$(command -v npm)"'], { encoding: 'utf8' }).trim();
    if (npm) candidates.push(join(dirname(npm), '..', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'));
  } catch {
    // no npm on PATH: the other candidates remain
  }
  const found = candidates.find((c): c is string => c !== undefined && existsSync(c));
  if (!found) throw new Error(`node-gyp not found (tried ${candidates.filter(Boolean).join(', ')}); set NODE_GYP`);
  return found;
}

/** Builds node/native (the setns addon) unless the build is newer than its sources. Returns the .node path. */
export function buildNativeAddon(): string {
  const dir = join(root, 'node', 'native');
  const out = join(dir, 'build', 'Release', 'vpc_lease_netns.node');
  const fresh = (): boolean => {
    const newest = Math.max(...['netns.c', 'binding.gyp'].map((f) => statSync(join(dir, f)).mtimeMs));
    return existsSync(out) && statSync(out).mtimeMs >= newest;
  };
  if (fresh()) return out;
  // Test suites build in parallel: one node-gyp at a time in this directory (a lock older than 2 min is stale).
  const lock = join(dir, '.build-lock');
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      if (Date.now() - statSync(lock).mtimeMs > 120_000) rmSync(lock, { recursive: true, force: true });
      else Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
    }
  }
  try {
    if (fresh()) return out;
    const nodedir =
      process.env['npm_config_nodedir'] ?? (existsSync('/usr/include/node/node_api.h') ? '/usr' : undefined);
    execFileSync(process.execPath, [nodeGypPath(), 'rebuild', ...(nodedir ? [`--nodedir=${nodedir}`] : [])], {
      cwd: dir,
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    return out;
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/**
 * The netlink package finds its binding with node-gyp-build relative to its own files; in the bundle the
 * binding sits beside the executable instead (dist/, or /opt/cni/bin after install).
 */
const netlinkBindingBesideExecutable: Plugin = {
  name: 'netlink-binding',
  setup(b) {
    b.onLoad({ filter: /[\\/]netlink[\\/]dist[\\/]raw\.js$/ }, (args) => {
      const source = readFileSync(args.path, 'utf8');
      const call = "require('node-gyp-build')(__dirname + '/..')";
      if (!source.includes(call)) throw new Error(`netlink's raw.js no longer loads its binding with ${call}`);
      const beside =
        "require(require('path').join(require('path').dirname(require('fs').realpathSync(process.argv[1])), 'netlink.node'))";
      return { contents: source.replace(call, beside), loader: 'js' };
    });
  },
};

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
    plugins: [netlinkBindingBesideExecutable],
    logOverride: { 'empty-import-meta': 'silent' },
    metafile: true,
    legalComments: 'none',
  });
  const sdk = Object.keys(result.metafile.inputs).filter((p) => p.includes('@aws-sdk/') || p.includes('@smithy/'));
  if (sdk.length > 0)
    throw new Error(`the CNI bundle must not contain the AWS SDK, found: ${sdk.slice(0, 5).join(', ')}`);
  // Caches of an older bundle would be rejected by V8 anyway; drop them so the next call writes fresh ones.
  for (const name of readdirSync(outDir)) if (name.endsWith('.v8cache')) rmSync(join(outDir, name));
  // Beside the executable, a package.json saying CommonJS (the repo's says module).
  writeFileSync(join(outDir, 'package.json'), '{ "type": "commonjs" }\n');
  const prebuild = join(root, 'node_modules', 'netlink', 'prebuilds', `linux-${process.arch}`, 'node.napi.node');
  if (!existsSync(prebuild)) throw new Error(`no netlink prebuild for linux-${process.arch}`);
  copyFileSync(prebuild, join(outDir, 'netlink.node'));
  copyFileSync(buildNativeAddon(), join(outDir, 'vpc_lease_netns.node'));
  return launcher;
}

async function buildLambdas(): Promise<void> {
  const lambdasDir = join(root, 'lambdas');
  const names = readdirSync(lambdasDir).filter((n) => existsSync(join(lambdasDir, n, 'handler.ts')));
  for (const name of names) {
    const outfile = join(dist, 'lambdas', name, 'index.mjs');
    mkdirSync(dirname(outfile), { recursive: true });
    await build({
      entryPoints: [join(lambdasDir, name, 'handler.ts')],
      outfile,
      bundle: true,
      platform: 'node',
      target: 'node20',
      format: 'esm',
      minifyWhitespace: true,
      minifySyntax: true,
      sourcemap: 'linked',
      // CommonJS dependencies inside an ESM bundle still call require() for Node built-ins.
      banner: {
        js: "import { createRequire as __vpcCreateRequire } from 'node:module'; const require = __vpcCreateRequire(import.meta.url);",
      },
      legalComments: 'none',
    });
    console.log(`dist/lambdas/${name}/index.mjs`);
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const cni = await buildCni();
  const kib = Math.round(statSync(`${cni}.js`).size / 1024);
  console.log(`dist/vpc-lease-cni (launcher) + vpc-lease-cni.js (${kib} KiB) + netlink.node + vpc_lease_netns.node`);
  await buildLambdas();
}
