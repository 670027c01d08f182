/**
 * `npm run image`: the installer image the DaemonSet runs, as an OCI image archive (dist/vpc-lease-cni-image.tar),
 * with no Docker: one OCI image index with a linux/amd64 and a linux/arm64 image, so each node's runtime pulls
 * its own CPU's. Each image has one layer: that CPU's single executable and its natives under /app, and the
 * shared libraries the executable needs at the paths its loader searches — no shell, no package manager. The
 * entry point is the installer (`/app/vpc-lease-cni install`), which copies /app into the host's CNI bin dir and
 * writes the conflist. Builds both executables first (unchanged inputs reuse a cached build). Prints the index's
 * digest.
 */
import { existsSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SHIM_SOURCE_FILE } from '../../node/installer/install.js';
import { SEA_NATIVE_FILES } from '../../node/launcher/layout.js';
import { buildSea, seaDistDir } from '../build.js';
import { ARCH_INFO, type Arch, hostArch, sharedLibraries } from '../cross.js';
import { iptablesFiles } from './iptables.js';
import { type OciIndex, ociImage, ociImageIndex, type TarEntry } from './oci.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const IMAGE_FILE = 'vpc-lease-cni-image.tar';
/** Where the executable sits in the image; node/deploy/daemonset.yaml runs it from there. */
export const IMAGE_APP_DIR = 'app';
/** The CPUs `npm run image` builds for: EC2's x86 and Graviton nodes. */
export const IMAGE_ARCHES: readonly Arch[] = ['x64', 'arm64'];

export function imageName(): string {
  const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };
  return `vpc-lease/vpc-lease-cni:${version}`;
}

/**
 * One image's layer: the `arch` executable in `dir`, its natives, and the shared libraries they load; with
 * `iptables` (the default) Debian's iptables for the agent's connmark rules (packaging/image/iptables.ts).
 */
export function installerFiles(dir: string, arch: Arch, iptables = true): TarEntry[] {
  const app = ['vpc-lease-cni', ...SEA_NATIVE_FILES].map((f) => join(dir, f));
  // The shim is static (packaging/shim.ts): the installer copies it to the bin dir; it loads no library.
  const shim = join(dir, SHIM_SOURCE_FILE);
  for (const f of [...app, shim]) if (!existsSync(f)) throw new Error(`${f} is missing: run npm run build first`);
  const files: TarEntry[] = [...app, shim].map((f) => ({
    path: `${IMAGE_APP_DIR}/${f.slice(dir.length + 1)}`,
    data: readFileSync(f),
    mode: 0o755,
  }));
  const libs = new Map(app.flatMap((f) => sharedLibraries(f, arch)).map((l) => [l.imagePath, l.file]));
  for (const [path, file] of [...libs].sort(([a], [b]) => (a < b ? -1 : 1)))
    files.push({ path: path.slice(1), data: readFileSync(file), mode: 0o755 });
  if (iptables) files.push(...iptablesFiles(arch));
  return files;
}

export interface InstallerImageOptions {
  readonly name?: string;
  readonly gzipLevel?: number;
  /** The CPUs in the index (default this machine's only), each from seaDistDir(arch, distDir). */
  readonly arches?: readonly Arch[];
  /** Without iptables the agent leaves host-veth calls to the plugin on the host (tests of that path). */
  readonly iptables?: boolean;
}

/** The installer image: its archive, its digest, and each platform's manifest. */
export type InstallerImage = Pick<OciIndex, 'tarball' | 'digest' | 'manifests'>;

/**
 * The image of the executables under `distDir` (vpc-lease-cni and its natives beside it, per CPU): for several
 * CPUs an image index; for one, a plain image manifest of that platform (what tests that run on this machine's
 * CPU only import and push).
 */
export function installerImage(distDir: string, options: InstallerImageOptions = {}): InstallerImage {
  const arches = options.arches ?? [hostArch()];
  const name = options.name ?? imageName();
  const gzip = options.gzipLevel !== undefined ? { gzipLevel: options.gzipLevel } : {};
  const images = arches.map((arch) => {
    const { oci, variant } = ARCH_INFO[arch];
    return {
      platform: { os: 'linux', architecture: oci, ...(variant ? { variant } : {}) } as const,
      files: installerFiles(seaDistDir(arch, distDir), arch, options.iptables ?? true),
      entrypoint: [`/${IMAGE_APP_DIR}/vpc-lease-cni`, 'install'],
      labels: { 'org.opencontainers.image.title': 'vpc-lease-cni installer' },
    };
  });
  if (images.length !== 1) return ociImageIndex({ name, images, ...gzip });
  const image = ociImage({ ...images[0]!, name, ...gzip });
  const { tarball, digest, configDigest, layerDigest, layerBytes } = image;
  const platform = images[0]!.platform;
  return { tarball, digest, manifests: [{ platform, digest, configDigest, layerDigest, layerBytes }] };
}

/** Writes the archive (through a rename) and returns its path. */
export function writeInstallerImage(
  distDir: string,
  out: string = join(distDir, IMAGE_FILE),
  options: InstallerImageOptions = {},
): InstallerImage & { path: string } {
  const image = installerImage(distDir, options);
  const tmp = `${out}.${process.pid}.tmp`;
  writeFileSync(tmp, image.tarball);
  renameSync(tmp, out);
  return { ...image, path: out };
}

const mib = (bytes: number): string => (bytes / 2 ** 20).toFixed(1);

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const dist = join(root, 'dist');
  for (const arch of IMAGE_ARCHES) {
    const started = Date.now();
    const cni = await buildSea(seaDistDir(arch, dist), { arch, reuse: true });
    const seconds = ((Date.now() - started) / 1000).toFixed(0);
    console.log(`${arch}: ${cni} (${mib(statSync(cni).size)} MiB, built in ${seconds} s)`);
  }
  const image = writeInstallerImage(dist, join(dist, IMAGE_FILE), { arches: IMAGE_ARCHES });
  writeFileSync(join(dist, `${IMAGE_FILE}.digest`), `${image.digest}\n`);
  for (const m of image.manifests)
    console.log(`  ${m.platform.os}/${m.platform.architecture} ${m.digest} (layer ${mib(m.layerBytes)} MiB)`);
  console.log(`${imageName()} ${image.digest}`);
  console.log(
    `dist/${IMAGE_FILE} (${mib(image.tarball.length)} MiB): an OCI image index for linux/amd64 and linux/arm64`,
  );
}
