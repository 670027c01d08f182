import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSea, seaBaseNode } from '../../packaging/build.js';
import { ARCH_INFO, argv, elfMachine, runner } from '../../packaging/cross.js';
import { installerFiles } from '../../packaging/image/build-image.js';
import { tar } from '../../packaging/image/oci.js';
import { runPluginProcess } from '../support/plugin-process.js';
import { crossMissing } from './support/cross.js';

const skip = crossMissing();
/** Programs under qemu-user start in seconds, not milliseconds: each test's own limit (no speed is asserted). */
const QEMU_TEST_MS = 180_000;

/** The symbol versions (GLIBC_2.28, GLIBCXX_3.4.21, ...) an ELF names, highest per library family. */
function versionFloor(elf: Buffer): Record<string, number[]> {
  const floor: Record<string, number[]> = {};
  for (const m of elf.toString('latin1').matchAll(/\b(GLIBC|GLIBCXX|CXXABI)_(\d+(?:\.\d+)+)\b/g)) {
    const version = m[2]!.split('.').map(Number);
    const prev = floor[m[1]!];
    if (!prev || compareVersions(version, prev) > 0) floor[m[1]!] = version;
  }
  return floor;
}

function compareVersions(a: number[], b: number[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++)
    if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) - (b[i] ?? 0);
  return 0;
}

/** Families in which `elf` needs a newer version than `base` provides a floor for. */
function above(elf: Record<string, number[]>, base: Record<string, number[]>): string[] {
  return Object.entries(elf)
    .filter(([family, v]) => !base[family] || compareVersions(v, base[family]!) > 0)
    .map(([family, v]) => `${family}_${v.join('.')}`);
}

/**
 * The arm64 single executable (Graviton nodes), built on this x64 machine and run under qemu-user: it answers
 * VERSION, installs itself, and its image layer runs from its own root with only the libraries the image
 * carries. No ADD: Debian 12's qemu-user (7.2) fails the netlink package's size probe (recvmsg with
 * MSG_PEEK|MSG_TRUNC and no buffer) with EINVAL while translating the reply, which a kernel never does.
 */
describe.skipIf(skip)('the arm64 single executable, under qemu-user', () => {
  let dir: string;
  let build: string;
  const qemu = (file: string, args: readonly string[], env: Record<string, string>, stdin = '') => {
    const [bin, ...prefix] = runner('arm64');
    return runPluginProcess(bin!, [...prefix, file, ...args], env, stdin);
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'vpc-lease-arm64-'));
    build = join(dir, 'build');
    await buildSea(build, { arch: 'arm64', reuse: true });
  }, 600_000);
  afterAll(async () => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it(
    'is an aarch64 executable with aarch64 natives, made from the same Node version as the x64 one',
    () => {
      for (const f of readdirSync(build))
        expect([f, elfMachine(readFileSync(join(build, f)).subarray(0, 20))]).toEqual([f, ARCH_INFO.arm64.elfMachine]);
      const version = (node: string, arch: 'x64' | 'arm64') =>
        execFileSync(...argv([...runner(arch), node, '--version']), { encoding: 'utf8' }).trim();
      expect(version(seaBaseNode('arm64'), 'arm64')).toBe(version(seaBaseNode('x64'), 'x64'));
    },
    QEMU_TEST_MS,
  );

  it('its natives need no newer glibc or libstdc++ than Node itself does (the hosts Node runs on)', () => {
    const node = versionFloor(readFileSync(seaBaseNode('arm64')));
    expect(node['GLIBC']).toBeDefined();
    for (const f of readdirSync(build).filter((n) => n.endsWith('.node')))
      expect([f, above(versionFloor(readFileSync(join(build, f))), node)]).toEqual([f, []]);
    // The control: a binding built against a newer libstdc++ (as gcc 12 builds netlink's sources) is caught.
    const newer = Buffer.from('\0GLIBCXX_3.4.29\0GLIBC_2.17\0');
    expect(above(versionFloor(newer), node)).toEqual(['GLIBCXX_3.4.29']);
  });

  it(
    'answers VERSION',
    async () => {
      const r = await qemu(join(build, 'vpc-lease-cni'), [], { CNI_COMMAND: 'VERSION' }, '{}');
      expect(r.code, r.stderr).toBe(0);
      expect(r.json).toMatchObject({ cniVersion: '1.1.0', supportedVersions: expect.arrayContaining(['1.1.0']) });
    },
    QEMU_TEST_MS,
  );

  it(
    'installs itself with its natives and a conflist into a temp dir',
    async () => {
      const binDir = join(dir, 'opt-cni-bin');
      const confDir = join(dir, 'net.d');
      const config = JSON.stringify({ tableName: 'prod-leases' });
      const args = ['install', '--no-wait-ready', '--bin-dir', binDir, '--conf-dir', confDir, '--config', config];
      const r = await qemu(join(build, 'vpc-lease-cni'), [...args, '--service-cidrs', '10.96.0.0/12'], {});
      expect(r.code, r.stderr).toBe(0);
      expect(readdirSync(binDir).sort()).toEqual([
        'netlink.node',
        'vpc-lease-cni',
        'vpc-lease-cni-plugin',
        'vpc_lease_netns.node',
      ]);
      // What the runtime calls is the shim; the full executable sits beside it as its fallback.
      const builtAs: Record<string, string> = {
        'vpc-lease-cni': 'vpc-lease-cni-shim',
        'vpc-lease-cni-plugin': 'vpc-lease-cni',
      };
      for (const f of readdirSync(binDir))
        expect(readFileSync(join(binDir, f)).equals(readFileSync(join(build, builtAs[f] ?? f))), f).toBe(true);
      const conflist = JSON.parse(readFileSync(join(confDir, '10-vpc-lease.conflist'), 'utf8'));
      expect(conflist.plugins[0]).toMatchObject({ type: 'vpc-lease-cni', serviceCidrs: ['10.96.0.0/12'] });
      // The installed plugin itself: the shim would exec it as its fallback, which under qemu-user needs a
      // binfmt_misc handler for aarch64 that this machine need not have.
      const installed = await qemu(join(binDir, 'vpc-lease-cni-plugin'), [], { CNI_COMMAND: 'VERSION' }, '{}');
      expect(installed.code, installed.stderr).toBe(0);
    },
    QEMU_TEST_MS,
  );

  it(
    "runs from its image layer's own root, with only the libraries the layer carries",
    async () => {
      // The layer as the runtime unpacks it, and a static qemu in it: no path of this machine is visible.
      const rootfs = join(dir, 'rootfs');
      mkdirSync(rootfs);
      const layer = join(dir, 'layer.tar');
      execFileSync('sh', ['-c', 'cat > "$1"', 'sh', layer], { input: tar(installerFiles(build, 'arm64')) });
      execFileSync('tar', ['-xf', layer, '-C', rootfs]);
      const [qemuBin] = runner('arm64');
      copyFileSync(qemuBin!, join(rootfs, 'qemu'));
      expect(existsSync(join(rootfs, ARCH_INFO.arm64.loader))).toBe(true);
      const r = await runPluginProcess(
        '/usr/sbin/chroot',
        [rootfs, '/qemu', '/app/vpc-lease-cni'],
        { CNI_COMMAND: 'VERSION' },
        '',
      );
      expect(r.code, r.stderr).toBe(0);
      expect(r.json).toMatchObject({ cniVersion: '1.1.0' });
      // The agent's iptables (both backends) from the same root: arm64 binaries, libraries and all.
      for (const [multi, backend] of [
        ['xtables-nft-multi', 'nf_tables'],
        ['xtables-legacy-multi', 'legacy'],
      ] as const) {
        const ipt = await runPluginProcess(
          '/usr/sbin/chroot',
          [rootfs, '/qemu', `/usr/sbin/${multi}`, 'iptables-restore', '--version'],
          {},
          '',
        );
        expect(ipt.code, ipt.stderr).toBe(0);
        expect(ipt.stdout).toContain(`v1.8.9 (${backend})`);
      }
      expect(elfMachine(readFileSync(join(rootfs, 'usr/sbin/xtables-nft-multi')))).toBe(ARCH_INFO.arm64.elfMachine);
      // The control: without the libraries the layer carries, the same root cannot run it.
      rmSync(join(rootfs, 'lib', ARCH_INFO.arm64.triplet, 'libstdc++.so.6'));
      const without = await runPluginProcess(
        '/usr/sbin/chroot',
        [rootfs, '/qemu', '/app/vpc-lease-cni'],
        { CNI_COMMAND: 'VERSION' },
        '',
      );
      expect(without.code).not.toBe(0);
      expect(without.stderr).toContain('libstdc++.so.6');
    },
    QEMU_TEST_MS,
  );
});
