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
  readonly layerBytes: number;
}

/** An OCI platform (image-spec's `platform`: GOOS/GOARCH values, arm64's variant v8). */
export interface OciPlatform {
  readonly os: 'linux';
  readonly architecture: 'amd64' | 'arm64';
  readonly variant?: string;
}

export interface OciImageSpec {
  /** The single layer's files. */
  readonly files: readonly TarEntry[];
  readonly entrypoint: readonly string[];
  /** The config's User (`uid:gid`), e.g. the pause image's 65535:65535; default root. */
  readonly user?: string;
  /** Full reference, e.g. "vpc-lease/vpc-lease-cni:0.1.0": containerd names the import after it. */
  readonly name: string;
  readonly labels?: Readonly<Record<string, string>>;
  /** zlib level of the layer (default 9; tests trade size for time). */
  readonly gzipLevel?: number;
  /** Default linux/amd64. */
  readonly platform?: OciPlatform;
}

const MT = {
  index: 'application/vnd.oci.image.index.v1+json',
  manifest: 'application/vnd.oci.image.manifest.v1+json',
  config: 'application/vnd.oci.image.config.v1+json',
  layer: 'application/vnd.oci.image.layer.v1.tar+gzip',
} as const;

const AMD64: OciPlatform = { os: 'linux', architecture: 'amd64' };

interface Blob {
  readonly digest: string;
  readonly data: Buffer;
}

/** One platform's manifest, config and layer. */
interface BuiltManifest {
  readonly manifest: Blob;
  readonly config: Blob;
  readonly layer: Blob;
  readonly platform: OciPlatform;
}

const blob = (data: Buffer): Blob => ({ digest: sha256(data), data });
const blobPath = (digest: string): string => `blobs/sha256/${digest.slice('sha256:'.length)}`;

function buildManifest(spec: Omit<OciImageSpec, 'name'>): BuiltManifest {
  const platform = spec.platform ?? AMD64;
  const layerTar = tar(spec.files);
  const layer = blob(gzipSync(layerTar, { level: spec.gzipLevel ?? 9 }));
  const config = blob(
    Buffer.from(
      JSON.stringify({
        architecture: platform.architecture,
        os: platform.os,
        ...(platform.variant ? { variant: platform.variant } : {}),
        config: {
          Entrypoint: spec.entrypoint,
          WorkingDir: '/',
          Labels: spec.labels ?? {},
          ...(spec.user ? { User: spec.user } : {}),
        },
        rootfs: { type: 'layers', diff_ids: [sha256(layerTar)] },
      }),
    ),
  );
  const manifest = blob(
    Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: MT.manifest,
        config: { mediaType: MT.config, digest: config.digest, size: config.data.length },
        layers: [{ mediaType: MT.layer, digest: layer.digest, size: layer.data.length }],
      }),
    ),
  );
  return { manifest, config, layer, platform };
}

/**
 * The OCI layout archive: index.json names `top` (tagged `name`), the blobs hold everything, and docker's
 * manifest.json names `dockerImage` (docker load takes one image per tag).
 */
function layoutArchive(
  top: { mediaType: string; blob: Blob },
  name: string,
  dockerImage: BuiltManifest,
  blobs: readonly Blob[],
): Buffer {
  const tag = name.slice(name.lastIndexOf(':') + 1);
  const index = {
    schemaVersion: 2,
    mediaType: MT.index,
    manifests: [
      {
        mediaType: top.mediaType,
        digest: top.blob.digest,
        size: top.blob.data.length,
        annotations: { 'io.containerd.image.name': name, 'org.opencontainers.image.ref.name': tag },
      },
    ],
  };
  const dockerManifest = [
    {
      Config: blobPath(dockerImage.config.digest),
      RepoTags: [name],
      Layers: [blobPath(dockerImage.layer.digest)],
    },
  ];
  const unique = new Map(blobs.map((b) => [b.digest, b]));
  return tar([
    { path: 'oci-layout', data: Buffer.from('{"imageLayoutVersion":"1.0.0"}'), mode: 0o644 },
    { path: 'index.json', data: Buffer.from(JSON.stringify(index)), mode: 0o644 },
    { path: 'manifest.json', data: Buffer.from(JSON.stringify(dockerManifest)), mode: 0o644 },
    ...[...unique.values()].map((b) => ({ path: blobPath(b.digest), data: b.data, mode: 0o644 })),
  ]);
}

/** One image of one layer (linux/amd64 unless `spec.platform` says otherwise), as an OCI layout archive. */
export function ociImage(spec: OciImageSpec): OciImage {
  const built = buildManifest(spec);
  const { manifest, config, layer } = built;
  const tarball = layoutArchive({ mediaType: MT.manifest, blob: manifest }, spec.name, built, [
    manifest,
    config,
    layer,
  ]);
  return {
    tarball,
    digest: manifest.digest,
    layerDigest: layer.digest,
    configDigest: config.digest,
    layerBytes: layer.data.length,
  };
}

export interface OciIndexSpec {
  /** Full reference, e.g. "vpc-lease/vpc-lease-cni:0.1.0", given to the index. */
  readonly name: string;
  /** One image per platform, in this order in the index (the first is also docker's manifest.json image). */
  readonly images: readonly (Omit<OciImageSpec, 'name' | 'gzipLevel'> & { readonly platform: OciPlatform })[];
  readonly gzipLevel?: number;
}

export interface OciIndex {
  readonly tarball: Buffer;
  /** The image index's digest: what a registry reports for the pushed multi-platform image. */
  readonly digest: string;
  readonly manifests: readonly {
    platform: OciPlatform;
    digest: string;
    configDigest: string;
    layerDigest: string;
    /** The compressed layer's size: what a node of that platform pulls. */
    layerBytes: number;
  }[];
}

/**
 * A multi-platform image: an OCI image index (image-spec image-index.md) whose `manifests` carry each image's
 * `platform`, as an OCI layout archive whose index.json names that index. Runtimes pull the index and pick the
 * manifest of their node's platform.
 */
export function ociImageIndex(spec: OciIndexSpec): OciIndex {
  if (spec.images.length === 0) throw new Error('an image index needs at least one image');
  const keys = spec.images.map((i) => `${i.platform.os}/${i.platform.architecture}`);
  if (new Set(keys).size !== keys.length) throw new Error(`one image per platform, got ${keys.join(', ')}`);
  const built = spec.images.map((image) =>
    buildManifest({ ...image, ...(spec.gzipLevel !== undefined ? { gzipLevel: spec.gzipLevel } : {}) }),
  );
  const index = blob(
    Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: MT.index,
        manifests: built.map((b) => ({
          mediaType: MT.manifest,
          digest: b.manifest.digest,
          size: b.manifest.data.length,
          platform: {
            architecture: b.platform.architecture,
            os: b.platform.os,
            ...(b.platform.variant ? { variant: b.platform.variant } : {}),
          },
        })),
      }),
    ),
  );
  const tarball = layoutArchive({ mediaType: MT.index, blob: index }, spec.name, built[0]!, [
    index,
    ...built.flatMap((b) => [b.manifest, b.config, b.layer]),
  ]);
  return {
    tarball,
    digest: index.digest,
    manifests: built.map((b) => ({
      platform: b.platform,
      digest: b.manifest.digest,
      configDigest: b.config.digest,
      layerDigest: b.layer.digest,
      layerBytes: b.layer.data.length,
    })),
  };
}
