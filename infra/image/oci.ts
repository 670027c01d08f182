import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';

/**
 * A deterministic OCI image written without Docker: ustar archives with fixed owners, modes and times, entries
 * sorted, the layer gzipped by zlib (whose header carries no time), and JSON serialized in one fixed key order.
 * The same files give the same bytes and so the same digest on every build.
 */

export interface TarEntry {
  /** Path inside the archive, relative ("app/vpc-lease-cni"); directories end without a slash. */
  readonly path: string;
  /** File contents; undefined for a directory. */
  readonly data?: Buffer;
  readonly mode: number;
}

function octal(value: number, width: number): string {
  return `${value.toString(8).padStart(width - 1, '0')}\0`;
}

function header(entry: TarEntry): Buffer {
  const h = Buffer.alloc(512);
  const isDir = entry.data === undefined;
  const name = isDir ? `${entry.path}/` : entry.path;
  // ustar splits long names into prefix (155) + name (100) at a slash.
  let prefix = '';
  let short = name;
  if (Buffer.byteLength(name) > 100) {
    const cut = name.lastIndexOf('/', name.length - (isDir ? 2 : 1));
    prefix = name.slice(0, cut);
    short = name.slice(cut + 1);
    if (Buffer.byteLength(short) > 100 || Buffer.byteLength(prefix) > 155)
      throw new Error(`tar: path too long: ${name}`);
  }
  h.write(short, 0, 100, 'utf8');
  h.write(octal(entry.mode, 8), 100, 8, 'ascii');
  h.write(octal(0, 8), 108, 8, 'ascii');
  h.write(octal(0, 8), 116, 8, 'ascii');
  h.write(octal(isDir ? 0 : entry.data!.length, 12), 124, 12, 'ascii');
  h.write(octal(0, 12), 136, 12, 'ascii');
  h.write('        ', 148, 8, 'ascii');
  h.write(isDir ? '5' : '0', 156, 1, 'ascii');
  h.write('ustar\u000000', 257, 8, 'ascii');
  h.write('root', 265, 32, 'ascii');
  h.write('root', 297, 32, 'ascii');
  h.write(prefix, 345, 155, 'utf8');
  let sum = 0;
  for (const byte of h) sum += byte;
  h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8, 'ascii');
  return h;
}

/** A ustar archive of `entries`, sorted by path, every parent directory present before its children. */
export function tar(entries: readonly TarEntry[]): Buffer {
  const all = new Map<string, TarEntry>();
  for (const e of entries) {
    const parts = e.path.split('/');
    for (let i = 1; i < parts.length; i++) {
      const dir = parts.slice(0, i).join('/');
      if (!all.has(dir)) all.set(dir, { path: dir, mode: 0o755 });
    }
    all.set(e.path, e);
  }
  const chunks: Buffer[] = [];
  for (const path of [...all.keys()].sort()) {
    const e = all.get(path)!;
    chunks.push(header(e));
    if (e.data) {
      chunks.push(e.data);
      const pad = (512 - (e.data.length % 512)) % 512;
      if (pad) chunks.push(Buffer.alloc(pad));
    }
  }
  chunks.push(Buffer.alloc(1024));
  return Buffer.concat(chunks);
}

export function sha256(data: Buffer): string {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}

export interface OciImage {
  /** The image archive: an OCI image layout that `docker load` also reads (it carries docker's manifest.json). */
  readonly tarball: Buffer;
  /** The manifest's digest, what a registry reports for the pushed image. */
  readonly digest: string;
  readonly layerDigest: string;
  readonly configDigest: string;
}

export interface OciImageSpec {
  /** The single layer's files. */
  readonly files: readonly TarEntry[];
  readonly entrypoint: readonly string[];
  /** Full reference, e.g. "vpc-lease/vpc-lease-cni:0.1.0": containerd names the import after it. */
  readonly name: string;
  readonly labels?: Readonly<Record<string, string>>;
  /** zlib level of the layer (default 9; tests trade size for time). */
  readonly gzipLevel?: number;
}

const MT = {
  index: 'application/vnd.oci.image.index.v1+json',
  manifest: 'application/vnd.oci.image.manifest.v1+json',
  config: 'application/vnd.oci.image.config.v1+json',
  layer: 'application/vnd.oci.image.layer.v1.tar+gzip',
} as const;

/** One linux/amd64 image of one layer, as an OCI layout archive. */
export function ociImage(spec: OciImageSpec): OciImage {
  const layerTar = tar(spec.files);
  const layer = gzipSync(layerTar, { level: spec.gzipLevel ?? 9 });
  const layerDigest = sha256(layer);
  const config = Buffer.from(
    JSON.stringify({
      architecture: 'amd64',
      os: 'linux',
      config: { Entrypoint: spec.entrypoint, WorkingDir: '/', Labels: spec.labels ?? {} },
      rootfs: { type: 'layers', diff_ids: [sha256(layerTar)] },
    }),
  );
  const configDigest = sha256(config);
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: MT.manifest,
      config: { mediaType: MT.config, digest: configDigest, size: config.length },
      layers: [{ mediaType: MT.layer, digest: layerDigest, size: layer.length }],
    }),
  );
  const digest = sha256(manifest);
  const tag = spec.name.slice(spec.name.lastIndexOf(':') + 1);
  const index = {
    schemaVersion: 2,
    mediaType: MT.index,
    manifests: [
      {
        mediaType: MT.manifest,
        digest,
        size: manifest.length,
        annotations: { 'io.containerd.image.name': spec.name, 'org.opencontainers.image.ref.name': tag },
      },
    ],
  };
  const blob = (d: string): string => `blobs/sha256/${d.slice('sha256:'.length)}`;
  const dockerManifest = [{ Config: blob(configDigest), RepoTags: [spec.name], Layers: [blob(layerDigest)] }];
  const tarball = tar([
    { path: 'oci-layout', data: Buffer.from('{"imageLayoutVersion":"1.0.0"}'), mode: 0o644 },
    { path: 'index.json', data: Buffer.from(JSON.stringify(index)), mode: 0o644 },
    { path: 'manifest.json', data: Buffer.from(JSON.stringify(dockerManifest)), mode: 0o644 },
    { path: blob(digest), data: manifest, mode: 0o644 },
    { path: blob(configDigest), data: config, mode: 0o644 },
    { path: blob(layerDigest), data: layer, mode: 0o644 },
  ]);
  return { tarball, digest, layerDigest, configDigest };
}
