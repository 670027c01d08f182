import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { ociImage, ociImageIndex, sha256, tar } from '../../packaging/image/oci.js';

const dir = mkdtempSync(join(tmpdir(), 'vpc-lease-oci-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const spec = {
  files: [
    { path: 'app/vpc-lease-cni', data: Buffer.from('#!/bin/true\n'), mode: 0o755 },
    { path: 'lib/x86_64-linux-gnu/libc.so.6', data: Buffer.alloc(1500, 7), mode: 0o755 },
  ],
  entrypoint: ['/app/vpc-lease-cni', 'install'],
  name: 'vpc-lease/vpc-lease-cni:0.1.0',
};

/** GNU tar's listing of an archive we wrote: an independent reader of the format. */
function list(archive: Buffer): string[] {
  const file = join(dir, `${sha256(archive).slice(7, 19)}.tar`);
  writeFileSync(file, archive);
  return execFileSync('tar', ['-tvf', file, '--numeric-owner'], { encoding: 'utf8' }).trim().split('\n');
}

describe('the OCI image writer', () => {
  it('writes the same bytes, and so the same digest, for the same files; a changed file changes it', () => {
    const a = ociImage(spec);
    const b = ociImage(spec);
    expect(b.tarball.equals(a.tarball)).toBe(true);
    expect(b.digest).toBe(a.digest);
    const changed = ociImage({
      ...spec,
      files: [{ ...spec.files[0]!, data: Buffer.from('#!/bin/false\n') }, spec.files[1]!],
    });
    expect(changed.digest).not.toBe(a.digest);
  });

  it('lays out an OCI index whose manifest, config and layer are the blobs their digests name', () => {
    const image = ociImage(spec);
    const file = join(dir, 'image.tar');
    writeFileSync(file, image.tarball);
    const read = (path: string): Buffer => execFileSync('tar', ['-xOf', file, path]);
    const blob = (digest: string): Buffer => read(`blobs/sha256/${digest.slice(7)}`);
    expect(JSON.parse(read('oci-layout').toString())).toEqual({ imageLayoutVersion: '1.0.0' });
    const index = JSON.parse(read('index.json').toString());
    expect(index.manifests[0]).toMatchObject({
      digest: image.digest,
      annotations: { 'io.containerd.image.name': spec.name, 'org.opencontainers.image.ref.name': '0.1.0' },
    });
    const manifest = blob(image.digest);
    expect(sha256(manifest)).toBe(image.digest);
    const m = JSON.parse(manifest.toString());
    const config = blob(m.config.digest);
    const layer = blob(m.layers[0].digest);
    expect([sha256(config), sha256(layer)]).toEqual([m.config.digest, m.layers[0].digest]);
    const c = JSON.parse(config.toString());
    expect(c.config.Entrypoint).toEqual(spec.entrypoint);
    // diff_id is the digest of the uncompressed layer.
    expect(c.rootfs.diff_ids).toEqual([sha256(gunzipSync(layer))]);
    // docker load reads the same archive through manifest.json.
    expect(JSON.parse(read('manifest.json').toString())).toEqual([
      {
        Config: `blobs/sha256/${m.config.digest.slice(7)}`,
        RepoTags: [spec.name],
        Layers: [`blobs/sha256/${m.layers[0].digest.slice(7)}`],
      },
    ]);
  });

  it('writes layers tar reads back: parents first, root-owned, epoch times, modes kept', () => {
    const lines = list(tar(spec.files));
    expect(lines.map((l) => l.split(/\s+/).slice(-1)[0])).toEqual([
      'app/',
      'app/vpc-lease-cni',
      'lib/',
      'lib/x86_64-linux-gnu/',
      'lib/x86_64-linux-gnu/libc.so.6',
    ]);
    for (const line of lines) expect(line).toMatch(/^[d-]rwxr-xr-x 0\/0 .* 1970-01-01 00:00 /);
    const long = `${'d'.repeat(90)}/${'e'.repeat(60)}/file`;
    expect(list(tar([{ path: long, data: Buffer.from('x'), mode: 0o644 }])).at(-1)).toContain(long);
  });
});

describe('the OCI image index writer', () => {
  const arm64 = { os: 'linux', architecture: 'arm64', variant: 'v8' } as const;
  const amd64 = { os: 'linux', architecture: 'amd64' } as const;
  const indexSpec = {
    name: spec.name,
    images: [
      { ...spec, platform: amd64 },
      { ...spec, files: [{ ...spec.files[0]!, data: Buffer.from('#!/bin/arm\n') }], platform: arm64 },
    ],
  };

  it("names an image index (image-spec image-index.md) whose manifests carry each image's platform", () => {
    const image = ociImageIndex(indexSpec);
    const file = join(dir, 'index.tar');
    writeFileSync(file, image.tarball);
    const read = (path: string): Buffer => execFileSync('tar', ['-xOf', file, path]);
    const blob = (digest: string): Buffer => read(`blobs/sha256/${digest.slice(7)}`);
    const top = JSON.parse(read('index.json').toString());
    expect(top.manifests).toEqual([
      {
        mediaType: 'application/vnd.oci.image.index.v1+json',
        digest: image.digest,
        size: blob(image.digest).length,
        annotations: { 'io.containerd.image.name': spec.name, 'org.opencontainers.image.ref.name': '0.1.0' },
      },
    ]);
    expect(sha256(blob(image.digest))).toBe(image.digest);
    const index = JSON.parse(blob(image.digest).toString());
    expect(index.schemaVersion).toBe(2);
    expect(index.mediaType).toBe('application/vnd.oci.image.index.v1+json');
    expect(index.manifests.map((m: { platform: unknown }) => m.platform)).toEqual([amd64, arm64]);
    for (const m of index.manifests) {
      expect(m.mediaType).toBe('application/vnd.oci.image.manifest.v1+json');
      expect([sha256(blob(m.digest)), blob(m.digest).length]).toEqual([m.digest, m.size]);
      const manifest = JSON.parse(blob(m.digest).toString());
      const config = JSON.parse(blob(manifest.config.digest).toString());
      // The config says the same platform as the index's descriptor.
      expect({
        os: config.os,
        architecture: config.architecture,
        ...(config.variant ? { variant: config.variant } : {}),
      }).toEqual(m.platform);
    }
    // docker load's manifest.json names the first platform's image.
    const first = JSON.parse(blob(index.manifests[0].digest).toString());
    expect(JSON.parse(read('manifest.json').toString())[0].Config).toBe(`blobs/sha256/${first.config.digest.slice(7)}`);
  });

  it('writes the same bytes for the same images; changing one platform changes the index digest only there', () => {
    const a = ociImageIndex(indexSpec);
    expect(ociImageIndex(indexSpec).tarball.equals(a.tarball)).toBe(true);
    const changed = ociImageIndex({
      ...indexSpec,
      images: [indexSpec.images[0]!, { ...indexSpec.images[1]!, entrypoint: ['/app/other'] }],
    });
    expect(changed.digest).not.toBe(a.digest);
    expect(changed.manifests[0]!.digest).toBe(a.manifests[0]!.digest);
    expect(changed.manifests[1]!.digest).not.toBe(a.manifests[1]!.digest);
  });

  it('refuses two images of one platform, and an empty index', () => {
    expect(() => ociImageIndex({ ...indexSpec, images: [indexSpec.images[0]!, indexSpec.images[0]!] })).toThrow(
      /one image per platform/,
    );
    expect(() => ociImageIndex({ ...indexSpec, images: [] })).toThrow(/at least one image/);
  });
});
