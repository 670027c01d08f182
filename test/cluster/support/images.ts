import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ociImage } from '../../../packaging/image/oci.js';
import { goEnv, TOOLS_DIR } from '../../tools/build.js';

/** The sandbox image kubelet 1.34 and containerd 2.4 expect, by its real name. */
export const PAUSE_IMAGE = 'registry.k8s.io/pause:3.10.1';
/** The workload image, by a real name: Debian's busybox-static in it. */
export const BUSYBOX_IMAGE = 'docker.io/library/busybox:1.36';

/** The registries whose images the test serves from its loopback registry, under the same repository paths. */
const MIRRORED = { 'registry.k8s.io': 'https://registry.k8s.io', 'docker.io': 'https://registry-1.docker.io' };

/**
 * build/pause/linux/pause.c from the pinned k8s.io/kubernetes module (in the Go module cache once the tools are
 * built), compiled as its Makefile does: gcc -Os -Wall -Werror -static.
 */
export function buildPause(outDir: string): string {
  const moduleDir = execFileSync('go', ['list', '-m', '-f', '{{.Dir}}', 'k8s.io/kubernetes'], {
    cwd: join(TOOLS_DIR, 'kubernetes'),
    env: goEnv(),
    encoding: 'utf8',
  }).trim();
  mkdirSync(outDir, { recursive: true });
  const out = join(outDir, 'pause');
  execFileSync('gcc', [
    '-Os',
    '-Wall',
    '-Werror',
    '-static',
    '-DVERSION=v3.10.1-vpc-lease-test',
    '-o',
    out,
    join(moduleDir, 'build', 'pause', 'linux', 'pause.c'),
  ]);
  return out;
}

/** Pushes an OCI archive to `host/repository:tag` with skopeo (plain HTTP on loopback); returns the digest. */
export function pushArchive(archive: string, host: string, repositoryTag: string, workDir: string): string {
  const digestFile = join(workDir, `${repositoryTag.replace(/[/:]/g, '_')}.digest`);
  execFileSync(
    'skopeo',
    [
      'copy',
      '--preserve-digests',
      '--dest-tls-verify=false',
      '--digestfile',
      digestFile,
      `oci-archive:${archive}`,
      `docker://${host}/${repositoryTag}`,
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  return readFileSync(digestFile, 'utf8').trim();
}

/** The repository and tag of a docker.io or registry.k8s.io name, as its registry stores it. */
function repositoryTag(name: string): string {
  return name.slice(name.indexOf('/') + 1);
}

/**
 * The pause image (pause.c, USER 65535 as upstream's Dockerfile) and the busybox workload image, pushed to the
 * loopback registry under the paths their real registries use.
 */
export function pushClusterImages(host: string, workDir: string): { pause: string; busybox: string } {
  const pause = ociImage({
    files: [{ path: 'pause', data: readFileSync(buildPause(workDir)), mode: 0o755 }],
    entrypoint: ['/pause'],
    user: '65535:65535',
    name: PAUSE_IMAGE,
    gzipLevel: 1,
  });
  const busybox = ociImage({
    files: [{ path: 'bin/busybox', data: readFileSync('/bin/busybox'), mode: 0o755 }],
    entrypoint: ['/bin/busybox', 'sh'],
    name: BUSYBOX_IMAGE,
    gzipLevel: 1,
  });
  const digests = { pause: '', busybox: '' };
  for (const [key, image, name] of [
    ['pause', pause, PAUSE_IMAGE],
    ['busybox', busybox, BUSYBOX_IMAGE],
  ] as const) {
    const archive = join(workDir, `${key}.tar`);
    writeFileSync(archive, image.tarball);
    digests[key] = pushArchive(archive, host, repositoryTag(name), workDir);
  }
  return digests;
}

/**
 * containerd's `config_path` tree: each mirrored registry resolves and pulls from the loopback registry over
 * plain HTTP, so pods name images as on a real cluster; the loopback registry itself is plain HTTP too.
 */
export function writeRegistryHosts(dir: string, host: string): string {
  const entries: [string, string][] = [...Object.entries(MIRRORED), [host, `http://${host}`]];
  for (const [registry, server] of entries) {
    mkdirSync(join(dir, registry), { recursive: true });
    writeFileSync(
      join(dir, registry, 'hosts.toml'),
      [
        `server = ${JSON.stringify(server)}`,
        '',
        `[host.${JSON.stringify(`http://${host}`)}]`,
        '  capabilities = ["pull", "resolve"]',
        '  skip_verify = true',
        '',
      ].join('\n'),
    );
  }
  return dir;
}
