import { execFile } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSea } from '../../packaging/build.js';
import { writeInstallerImage } from '../../packaging/image/build-image.js';
import { sha256, tar } from '../../packaging/image/oci.js';
import { ecrAuthFile, pushImage } from '../../packaging/image/push.js';
import { renderDaemonSet } from '../../packaging/image/render-daemonset.js';
import { missing } from '../support/capabilities.js';
import { PrivateContainerd } from './support/containerd.js';
import { LocalRegistry } from './support/registry.js';

const INDEX = 'application/vnd.oci.image.index.v1+json';
const MANIFEST = 'application/vnd.oci.image.manifest.v1+json';

/** skopeo and docker-registry (apt), containerd to pull back (CI=true: absent is a failure). */
function toolsMissing(): string | undefined {
  const base = missing('root');
  if (base) return base;
  const absent = [
    '/usr/bin/skopeo',
    '/usr/bin/docker-registry',
    '/usr/bin/containerd',
    '/usr/bin/ctr',
    '/usr/sbin/runc',
  ];
  const gone = absent.filter((p) => !existsSync(p));
  if (gone.length === 0) return undefined;
  const reason = `not installed: ${gone.join(', ')} (apt packages skopeo, docker-registry, containerd, runc)`;
  if (process.env['CI'] === 'true') throw new Error(`CI must run this suite, but: ${reason}`);
  process.stderr.write(`skipping: ${reason}\n`);
  return reason;
}

/**
 * A two-platform OCI image index (linux/amd64 and linux/arm64, one busybox layer shared) as an OCI archive, the
 * shape `npm run image` writes for more than one platform.
 */
function twoPlatformArchive(file: string): string {
  const layerTar = tar([{ path: 'bin/busybox', data: readFileSync('/bin/busybox'), mode: 0o755 }]);
  const layer = gzipSync(layerTar, { level: 1 });
  const blobs = new Map<string, Buffer>([[sha256(layer), layer]]);
  const put = (data: Buffer): string => {
    blobs.set(sha256(data), data);
    return sha256(data);
  };
  const manifests = (['amd64', 'arm64'] as const).map((architecture) => {
    const config = Buffer.from(
      JSON.stringify({
        architecture,
        os: 'linux',
        config: { Entrypoint: ['/bin/busybox', 'sh'] },
        rootfs: { type: 'layers', diff_ids: [sha256(layerTar)] },
      }),
    );
    const manifest = Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: MANIFEST,
        config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: put(config), size: config.length },
        layers: [
          { mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', digest: sha256(layer), size: layer.length },
        ],
      }),
    );
    return {
      mediaType: MANIFEST,
      digest: put(manifest),
      size: manifest.length,
      platform: { architecture, os: 'linux' },
    };
  });
  const index = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: INDEX, manifests }));
  const indexDigest = put(index);
  const layout = { schemaVersion: 2, manifests: [{ mediaType: INDEX, digest: indexDigest, size: index.length }] };
  writeFileSync(
    file,
    tar([
      { path: 'oci-layout', data: Buffer.from('{"imageLayoutVersion":"1.0.0"}'), mode: 0o644 },
      { path: 'index.json', data: Buffer.from(JSON.stringify(layout)), mode: 0o644 },
      ...[...blobs].map(([d, data]) => ({ path: `blobs/sha256/${d.slice(7)}`, data, mode: 0o644 })),
    ]),
  );
  return indexDigest;
}

function runTool(file: string, args: readonly string[], env: NodeJS.ProcessEnv = process.env) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(file, args, { env }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe('Function: pushImage — credentials and bad input (fake aws and skopeo on PATH)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vpc-lease-push-unit-'));
  const bin = join(dir, 'bin');
  const record = join(dir, 'record');
  const archive = join(dir, 'image.tar');
  const token = 'ecr-token-secret-42';
  const digest = `sha256:${'c'.repeat(64)}`;
  mkdirSync(bin);
  writeFileSync(archive, 'x');
  // The fakes record their argv and, for skopeo, the auth file as it was while skopeo ran.
  writeFileSync(
    join(bin, 'aws'),
    `#!/bin/sh\necho "aws $*" >> "${record}"\n[ -n "$FAIL_AWS" ] && { echo "Unable to locate credentials" >&2; exit 255; }\necho "${token}"\n`,
  );
  writeFileSync(
    join(bin, 'skopeo'),
    [
      '#!/bin/sh',
      `echo "skopeo $*" >> "${record}"`,
      'while [ $# -gt 0 ]; do',
      `  case "$1" in --digestfile) printf '${digest}' > "$2"; shift;; --dest-authfile) echo "authfile $(stat -c %a "$2") $(cat "$2")" >> "${record}"; echo "authpath $2" >> "${record}"; shift;; esac`,
      '  shift',
      'done',
    ].join('\n'),
  );
  for (const f of ['aws', 'skopeo']) chmodSync(join(bin, f), 0o755);
  const env = (extra: Record<string, string> = {}): NodeJS.ProcessEnv => ({
    PATH: `${bin}:/usr/bin:/bin`,
    ...extra,
  });
  const lines = (): string[] => (existsSync(record) ? readFileSync(record, 'utf8').trim().split('\n') : []);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it.each([
    ['eu-west-1', '123456789012.dkr.ecr.eu-west-1.amazonaws.com'],
    ['cn-north-1', '123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn'],
    ['us-gov-west-1', '123456789012.dkr.ecr-fips.us-gov-west-1.amazonaws.com'],
  ])('logs in to ECR in %s with a token in a private auth file, never on a command line', async (region, registry) => {
    rmSync(record, { force: true });
    const pushed = await pushImage({ archive, target: `${registry}/vpc-lease-cni:0.1.0`, env: env() });
    expect(pushed).toEqual({ digest, reference: `${registry}/vpc-lease-cni@${digest}` });
    const [aws, skopeo, authfile, authpath] = lines();
    expect(aws).toBe(`aws ecr get-login-password --region ${region}`);
    expect(skopeo).toMatch(/^skopeo copy --all --preserve-digests --digestfile \S+ --dest-authfile \S+ oci-archive:/);
    expect(skopeo).toContain(` docker://${registry}/vpc-lease-cni:0.1.0`);
    expect(skopeo).not.toContain(token);
    expect(skopeo).not.toContain(Buffer.from(`AWS:${token}`).toString('base64'));
    expect(skopeo).not.toContain('--dest-tls-verify');
    const auth = Buffer.from(`AWS:${token}`).toString('base64');
    expect(authfile).toBe(`authfile 600 ${ecrAuthFile(registry, token).trim()}`);
    expect(JSON.parse(ecrAuthFile(registry, token))).toEqual({ auths: { [registry]: { auth } } });
    // The token does not outlive the push.
    expect(existsSync(authpath!.slice('authpath '.length))).toBe(false);
  });

  it('uses skopeo’s own credentials for other registries, and plain HTTP only on loopback', async () => {
    rmSync(record, { force: true });
    await pushImage({ archive, target: 'registry.example.com/team/vpc-lease-cni:1', env: env() });
    await pushImage({ archive, target: '127.0.0.1:5000/vpc-lease-cni:1', env: env() });
    const [remote, local] = lines();
    expect(remote).not.toMatch(/--dest-authfile|--dest-tls-verify/);
    expect(local).toContain('--dest-tls-verify=false');
  });

  it('stops before skopeo when the ECR login fails, and refuses bad targets and archives', async () => {
    rmSync(record, { force: true });
    await expect(
      pushImage({ archive, target: '123456789012.dkr.ecr.eu-west-1.amazonaws.com/x:1', env: env({ FAIL_AWS: '1' }) }),
    ).rejects.toThrow(/aws ecr failed: Unable to locate credentials/);
    expect(lines().filter((l) => l.startsWith('skopeo'))).toEqual([]);
    await expect(pushImage({ archive, target: 'vpc-lease-cni:1', env: env() })).rejects.toThrow(
      /not an image reference/,
    );
    await expect(pushImage({ archive, target: `r.example/x@${digest}`, env: env() })).rejects.toThrow(/to a tag/);
    await expect(pushImage({ archive: join(dir, 'none.tar'), target: 'r.example/x:1', env: env() })).rejects.toThrow(
      /npm run image/,
    );
    expect(lines().filter((l) => l.startsWith('skopeo'))).toEqual([]);
  });
});

const skip = toolsMissing();

/**
 * The whole path without Docker: skopeo pushes the archive to a real registry server over HTTP, containerd pulls it
 * back by the digest push-image printed, and the installer runs from it as the DaemonSet's init container does.
 */
describe.skipIf(skip)('push-image → docker-registry → containerd pull by digest → installer', () => {
  let work: string;
  let registry: LocalRegistry;
  let containerd: PrivateContainerd;
  let installerArchive: string;
  let installerDigest: string;

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'vpc-lease-push-'));
    const dist = join(work, 'dist');
    await buildSea(dist, { reuse: true });
    const image = writeInstallerImage(dist, join(work, 'installer.tar'), { gzipLevel: 1 });
    installerArchive = image.path;
    installerDigest = image.digest;
    registry = new LocalRegistry();
    await registry.start();
    containerd = new PrivateContainerd();
    await containerd.start();
  }, 300_000);

  afterAll(async () => {
    await containerd?.close();
    registry?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  }, 60_000);

  let pushed = '';

  it('pushes the installer archive and prints its digest reference (npm run push-image)', async () => {
    const target = `${registry.host}/team/vpc-lease-cni:0.1.0`;
    const r = await runTool('npx', ['tsx', 'packaging/image/push.ts', target, '--archive', installerArchive]);
    expect(r.code, r.stderr).toBe(0);
    pushed = r.stdout.trim();
    expect(pushed).toBe(`${registry.host}/team/vpc-lease-cni@${installerDigest}`);
    const served = await registry.manifest('team/vpc-lease-cni', '0.1.0');
    expect(served).toMatchObject({ status: 200, digest: installerDigest, mediaType: MANIFEST });
    expect(renderDaemonSet(readFileSync('node/deploy/daemonset.yaml', 'utf8'), pushed)).toContain(`image: ${pushed}\n`);
  }, 120_000);

  it('containerd pulls it by digest and the installer runs from it', async () => {
    expect(pushed).not.toBe('');
    const pull = await containerd.ctr(['images', 'pull', '--plain-http', pushed]);
    expect(pull.code, pull.stderr).toBe(0);
    const r = await containerd.ctr([
      'run',
      '--rm',
      '--read-only',
      '--mount',
      'type=bind,src=/opt/cni/bin,dst=/host/opt/cni/bin,options=rbind:rw',
      '--mount',
      'type=bind,src=/etc/cni/net.d,dst=/host/etc/cni/net.d,options=rbind:rw',
      '--env',
      'VPC_LEASE_CNI_CONFIG={"tableName":"vpc-lease"}',
      '--env',
      'VPC_LEASE_SERVICE_CIDRS=10.100.0.0/16',
      pushed,
      'install-from-registry',
      '/app/vpc-lease-cni',
      'install',
      '--bin-dir',
      '/host/opt/cni/bin',
      '--conf-dir',
      '/host/etc/cni/net.d',
      '--cni-version',
      '1.0.0',
      '--chain',
      '',
      // No store here: the READY wait is the installer suite's subject, not this one's.
      '--no-wait-ready',
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(readdirSync(containerd.binDir).sort()).toEqual([
      'netlink.node',
      'vpc-lease-cni',
      'vpc-lease-cni-plugin',
      'vpc_lease_netns.node',
    ]);
    const conflist = JSON.parse(readFileSync(join(containerd.confDir, '10-vpc-lease.conflist'), 'utf8'));
    expect(conflist.plugins[0]).toMatchObject({
      type: 'vpc-lease-cni',
      tableName: 'vpc-lease',
      serviceCidrs: ['10.100.0.0/16'],
    });
  }, 120_000);

  it('a digest the registry does not hold is not pulled', async () => {
    const wrong = pushed.replace(/@sha256:.*/, `@sha256:${'0'.repeat(64)}`);
    const pull = await containerd.ctr(['images', 'pull', '--plain-http', wrong]);
    expect(pull.code).not.toBe(0);
    expect(pull.stderr).toMatch(/not found/);
  }, 60_000);

  it('pushes a two-platform index as an index, and containerd runs this machine’s platform from it', async () => {
    const archive = join(work, 'index.tar');
    const indexDigest = twoPlatformArchive(archive);
    const reference = (await pushImage({ archive, target: `${registry.host}/team/busybox:multi` })).reference;
    expect(reference).toBe(`${registry.host}/team/busybox@${indexDigest}`);
    const served = await registry.manifest('team/busybox', 'multi');
    expect(served).toMatchObject({ status: 200, digest: indexDigest, mediaType: INDEX });
    const platforms = (served.body as { manifests: { platform: { architecture: string } }[] }).manifests;
    expect(platforms.map((m) => m.platform.architecture)).toEqual(['amd64', 'arm64']);
    // --all pushed every platform's manifest, not only the index.
    for (const m of (served.body as { manifests: { digest: string }[] }).manifests)
      expect((await registry.manifest('team/busybox', m.digest)).status).toBe(200);
    const pull = await containerd.ctr(['images', 'pull', '--plain-http', reference]);
    expect(pull.code, pull.stderr).toBe(0);
    const run = await containerd.ctr(['run', '--rm', reference, 'busybox-multi', '/bin/busybox', 'echo', 'ran']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout.trim()).toBe('ran');
  }, 120_000);
});
