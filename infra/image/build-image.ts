/**
 * `npm run image`: the installer image the DaemonSet runs, as an OCI image archive (dist/vpc-lease-cni-image.tar),
 * with no Docker. One layer: the single executable and its natives under /app, and the shared libraries the
 * executable needs (found with ldd) at their paths — no shell, no package manager. The entry point is the
 * installer (`/app/vpc-lease-cni install`), which copies /app into the host's CNI bin dir and writes the
 * conflist. Builds the executable first when dist/ has none. Prints the image digest.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SEA_NATIVE_FILES } from '../../node/launcher/layout.js';
import { buildSea } from '../build.js';
import { type OciImage, ociImage, type TarEntry } from './oci.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const IMAGE_FILE = 'vpc-lease-cni-image.tar';
/** Where the executable sits in the image; node/deploy/daemonset.yaml runs it from there. */
export const IMAGE_APP_DIR = 'app';

/** The shared objects `file` loads, with the dynamic loader, as absolute paths (ldd's view of this machine). */
export function sharedLibraries(file: string): string[] {
  const out = execFileSync('ldd', [file], { encoding: 'utf8' });
  const libs: string[] = [];
  for (const line of out.split('\n')) {
    const m = /=>\s+(\/\S+)/.exec(line) ?? /^\s*(\/\S+)\s+\(/.exec(line);
    if (m) libs.push(m[1]!);
  }
  return libs;
}

export function imageName(): string {
  const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };
  return `vpc-lease/vpc-lease-cni:${version}`;
}

/** The image of the executable in `distDir` (vpc-lease-cni and its natives beside it). */
export function installerImage(distDir: string, options: { name?: string; gzipLevel?: number } = {}): OciImage {
  const app = ['vpc-lease-cni', ...SEA_NATIVE_FILES].map((f) => join(distDir, f));
  for (const f of app) if (!existsSync(f)) throw new Error(`${f} is missing: run npm run build first`);
  const files: TarEntry[] = app.map((f) => ({
    path: `${IMAGE_APP_DIR}/${f.slice(distDir.length + 1)}`,
    data: readFileSync(f),
    mode: 0o755,
  }));
  const libs = [...new Set(app.flatMap(sharedLibraries))].sort();
  for (const lib of libs) files.push({ path: lib.slice(1), data: readFileSync(lib), mode: 0o755 });
  return ociImage({
    files,
    entrypoint: [`/${IMAGE_APP_DIR}/vpc-lease-cni`, 'install'],
    name: options.name ?? imageName(),
    ...(options.gzipLevel !== undefined ? { gzipLevel: options.gzipLevel } : {}),
    labels: { 'org.opencontainers.image.title': 'vpc-lease-cni installer' },
  });
}

/** Writes the archive (through a rename) and returns its path. */
export function writeInstallerImage(
  distDir: string,
  out: string = join(distDir, IMAGE_FILE),
  options: { gzipLevel?: number } = {},
): OciImage & { path: string } {
  const image = installerImage(distDir, options);
  const tmp = `${out}.${process.pid}.tmp`;
  writeFileSync(tmp, image.tarball);
  renameSync(tmp, out);
  return { ...image, path: out };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const dist = join(root, 'dist');
  if (!existsSync(join(dist, 'vpc-lease-cni'))) await buildSea(dist);
  const image = writeInstallerImage(dist);
  writeFileSync(join(dist, `${IMAGE_FILE}.digest`), `${image.digest}\n`);
  const mib = (image.tarball.length / 2 ** 20).toFixed(1);
  console.log(`${imageName()} ${image.digest}`);
  console.log(`dist/${IMAGE_FILE} (${mib} MiB): ctr images import, docker load, or the CDK's TarballImageAsset`);
}
