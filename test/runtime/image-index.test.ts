import { execFileSync } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, readSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSea, seaDistDir } from '../../packaging/build.js';
import { ARCH_INFO, elfMachine } from '../../packaging/cross.js';
import { IMAGE_ARCHES, imageName, writeInstallerImage } from '../../packaging/image/build-image.js';
import type { OciIndex } from '../../packaging/image/oci.js';
import { PrivateContainerd } from './support/containerd.js';
import { containerdMissing, crossMissing } from './support/cross.js';

const skip = crossMissing();

/**
 * `npm run image`'s archive as a node's runtime sees it: one index, an amd64 and an arm64 image, each image's
 * executable built for its CPU; containerd imports the whole index and runs the amd64 installer on this machine.
 */
describe.skipIf(skip)('the installer image index for linux/amd64 and linux/arm64', () => {
  let work: string;
  let image: OciIndex & { path: string };
  const read = (path: string): Buffer => execFileSync('tar', ['-xOf', image.path, path], { maxBuffer: 2 ** 30 });
  const blob = (digest: string): Buffer => read(`blobs/sha256/${digest.slice(7)}`);
  const json = (digest: string) => JSON.parse(blob(digest).toString());

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'vpc-lease-index-'));
    const dist = join(work, 'dist');
    for (const arch of IMAGE_ARCHES) await buildSea(seaDistDir(arch, dist), { arch, reuse: true });
    image = writeInstallerImage(dist, join(work, 'image.tar'), { arches: IMAGE_ARCHES, gzipLevel: 1 });
  }, 900_000);
  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('holds one image per platform, each config naming its architecture', () => {
    const top = JSON.parse(read('index.json').toString());
    expect(top.manifests).toHaveLength(1);
    expect(top.manifests[0]).toMatchObject({
      mediaType: 'application/vnd.oci.image.index.v1+json',
      digest: image.digest,
      annotations: { 'io.containerd.image.name': imageName() },
    });
    const index = json(image.digest);
    expect(index.manifests.map((m: { platform: unknown }) => m.platform)).toEqual([
      { os: 'linux', architecture: 'amd64' },
      { os: 'linux', architecture: 'arm64', variant: 'v8' },
    ]);
    for (const m of index.manifests) {
      const config = json(json(m.digest).config.digest);
      expect([config.os, config.architecture]).toEqual([m.platform.os, m.platform.architecture]);
      expect(config.config.Entrypoint).toEqual(['/app/vpc-lease-cni', 'install']);
    }
  });

  it("puts in each platform's layer an executable, natives and iptables of that platform's CPU", () => {
    const index = json(image.digest);
    for (const [i, arch] of IMAGE_ARCHES.entries()) {
      const m = index.manifests[i];
      expect(m.platform.architecture).toBe(ARCH_INFO[arch].oci);
      const layerFile = join(work, `layer-${arch}.tar.gz`);
      execFileSync('sh', ['-c', 'cat > "$1"', 'sh', layerFile], {
        input: blob(json(m.digest).layers[0].digest),
        maxBuffer: 2 ** 30,
      });
      const out = join(work, `layer-${arch}`);
      mkdirSync(out);
      execFileSync('tar', ['-xzf', layerFile, '-C', out, 'app', 'usr/sbin']);
      for (const f of [
        'app/vpc-lease-cni',
        'app/netlink.node',
        'app/vpc_lease_netns.node',
        'usr/sbin/xtables-nft-multi',
      ])
        expect([arch, f, elfMachine(head(join(out, f)))]).toEqual([arch, f, ARCH_INFO[arch].elfMachine]);
    }
  }, 180_000);

  describe.skipIf(containerdMissing())("in Debian's containerd", () => {
    let containerd: PrivateContainerd;
    beforeAll(async () => {
      containerd = new PrivateContainerd();
      await containerd.start();
    }, 120_000);
    afterAll(async () => {
      await containerd?.close();
    }, 60_000);

    it('imports every platform of the archive and runs the amd64 installer it unpacked', async () => {
      const imported = await containerd.ctr(['images', 'import', '--all-platforms', image.path]);
      expect(imported.code, imported.stderr).toBe(0);
      const list = await containerd.ctr(['images', 'ls']);
      const row = list.stdout.split('\n').find((l) => l.startsWith(`${imageName()} `));
      expect(row, list.stdout).toContain(image.digest);
      expect(row).toContain('linux/amd64,linux/arm64/v8');
      // Both platforms' content is in the store, not only this machine's.
      for (const m of json(image.digest).manifests) {
        const content = await containerd.ctr(['content', 'get', json(m.digest).layers[0].digest]);
        expect(content.code, `${m.platform.architecture}: ${content.stderr}`).toBe(0);
      }
      const run = await containerd.ctr([
        'run',
        '--rm',
        '--env',
        'CNI_COMMAND=VERSION',
        imageName(),
        'index-version',
        '/app/vpc-lease-cni',
      ]);
      expect(run.code, run.stderr).toBe(0);
      expect(JSON.parse(run.stdout)).toMatchObject({ cniVersion: '1.1.0' });
    }, 300_000);
  });
});

/** The first bytes of a file: its ELF header. */
function head(file: string): Buffer {
  const fd = openSync(file, 'r');
  try {
    const buf = Buffer.alloc(20);
    readSync(fd, buf, 0, 20, 0);
    return buf;
  } finally {
    closeSync(fd);
  }
}
