import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  install,
  installOptionsFromArgs,
  type ReadyWait,
  SHIM_SOURCE_FILE,
  SUPPORT_FILES,
} from '../../node/installer/install.js';
import { missing } from '../support/capabilities.js';

/** A chained plugin that answers VERSION like the reference plugins do, speaking exactly `versions`. */
function fakePlugin(path: string, versions: readonly string[]): void {
  const answer = JSON.stringify({ cniVersion: versions.at(-1), supportedVersions: versions });
  writeFileSync(path, `#!/bin/sh\ncat >/dev/null\necho '${answer}'\n`, { mode: 0o755 });
}

describe('install', () => {
  let dir: string;
  let source: string;
  let binDir: string;
  let confDir: string;
  const args = (...extra: string[]) =>
    installOptionsFromArgs(
      ['--bin-dir', binDir, '--conf-dir', confDir, '--service-cidrs', '10.96.0.0/12', ...extra],
      {},
      source,
    );
  const conflist = () => JSON.parse(readFileSync(join(confDir, '10-vpc-lease.conflist'), 'utf8'));

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'vpc-lease-install-'));
    const dist = join(dir, 'dist');
    mkdirSync(dist);
    for (const file of [...SUPPORT_FILES, SHIM_SOURCE_FILE]) writeFileSync(join(dist, file), 'x');
    source = join(dist, 'vpc-lease-cni');
    writeFileSync(source, '#!/bin/sh\n', { mode: 0o755 });
    binDir = join(dir, 'bin');
    confDir = join(dir, 'net.d');
    mkdirSync(binDir);
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const read = (path: string) => JSON.parse(readFileSync(path, 'utf8'));

  it('writes cniVersion 1.0.0 with cniVersions [1.0.0, 1.1.0] by default when the chain speaks 1.1.0', async () => {
    fakePlugin(join(binDir, 'portmap'), ['0.4.0', '1.0.0', '1.1.0']);
    const report = await install(args('--no-wait-ready'));
    expect(conflist()).toEqual({
      cniVersion: '1.0.0',
      cniVersions: ['1.0.0', '1.1.0'],
      name: 'vpc-lease',
      plugins: [
        { type: 'vpc-lease-cni', serviceCidrs: ['10.96.0.0/12'] },
        { type: 'portmap', capabilities: { portMappings: true } },
      ],
    });
    expect(report.warnings).toEqual([]);
  });

  it('offers only 1.0.0 when a chained plugin stops there, and says that new runtimes lose GC and STATUS', async () => {
    fakePlugin(join(binDir, 'portmap'), ['0.4.0', '1.0.0']);
    const report = await install(args('--no-wait-ready'));
    expect(conflist()).toMatchObject({ cniVersion: '1.0.0', cniVersions: ['1.0.0'] });
    expect(report.warnings).toEqual([
      expect.stringMatching(/portmap does not speak 1\.1\.0: .* use 1\.0\.0, without GC and STATUS/),
    ]);
  });

  it('refuses a chained plugin that cannot speak cniVersion 1.0.0, before writing anything', async () => {
    fakePlugin(join(binDir, 'portmap'), ['0.3.1', '0.4.0']);
    await expect(install(args('--no-wait-ready'))).rejects.toThrow(
      /portmap does not speak cniVersion 1\.0\.0 \(it supports 0\.3\.1, 0\.4\.0\)/,
    );
    expect(existsSync(join(confDir, '10-vpc-lease.conflist'))).toBe(false);
    expect(existsSync(join(binDir, 'vpc-lease-cni'))).toBe(false);
  });

  it('--cni-version pins one version: no cniVersions, and a chain that lacks it is refused', async () => {
    fakePlugin(join(binDir, 'portmap'), ['0.4.0', '1.0.0']);
    await expect(install(args('--no-wait-ready', '--cni-version', '1.1.0'))).rejects.toThrow(
      /portmap does not speak cniVersion 1\.1\.0 \(it supports 0\.4\.0, 1\.0\.0\)/,
    );
    expect(existsSync(join(confDir, '10-vpc-lease.conflist'))).toBe(false);
    await install(args('--no-wait-ready', '--cni-version', '0.4.0'));
    expect(conflist()).toEqual(expect.objectContaining({ cniVersion: '0.4.0' }));
    expect('cniVersions' in conflist()).toBe(false);
  });

  it('warns about a chained plugin not in the bin dir yet (its versions unchecked)', async () => {
    const report = await install(args('--no-wait-ready'));
    expect(conflist()).toMatchObject({ cniVersions: ['1.0.0', '1.1.0'] });
    expect(report.warnings).toEqual([expect.stringMatching(/portmap is not in the bin dir yet/)]);
  });

  it('refuses a chained plugin type that is not a plain file name', async () => {
    await expect(install(args('--no-wait-ready', '--chain', '../../usr/bin/evil'))).rejects.toThrow(
      /bad chained plugin type/,
    );
  });

  describe("another primary CNI's configuration (aws-node's 10-aws.conflist sorts first)", () => {
    const awsNode = { cniVersion: '0.4.0', name: 'aws-cni', plugins: [{ type: 'aws-cni' }, { type: 'portmap' }] };
    const binaries = () => ['vpc-lease-cni', ...SUPPORT_FILES].filter((f) => existsSync(join(binDir, f)));

    it('refuses before copying anything, naming the file and the fix', async () => {
      mkdirSync(confDir);
      writeFileSync(join(confDir, '10-aws.conflist'), JSON.stringify(awsNode));
      await expect(install(args('--no-wait-ready'))).rejects.toThrow(
        /10-aws\.conflist.*delete daemonset aws-node.*--allow-other-cni/s,
      );
      expect(binaries()).toEqual([]);
      expect(existsSync(join(confDir, '10-vpc-lease.conflist'))).toBe(false);
    });

    it('installs with --allow-other-cni (or its environment variable), saying what will win', async () => {
      mkdirSync(confDir);
      writeFileSync(join(confDir, '10-aws.conflist'), JSON.stringify(awsNode));
      const lines: string[] = [];
      const wait: ReadyWait = {
        probe: async () => undefined,
        sleep: async () => undefined,
        nowMs: () => 0,
        log: (l) => lines.push(l),
      };
      await install(args('--no-wait-ready', '--allow-other-cni'), wait);
      expect(conflist().plugins[0].type).toBe('vpc-lease-cni');
      expect(lines.some((l) => l.includes('10-aws.conflist'))).toBe(true);
      const fromEnv = installOptionsFromArgs(
        ['--service-cidrs', '10.96.0.0/12'],
        { VPC_LEASE_ALLOW_OTHER_CNI: 'true' },
        source,
      );
      expect(fromEnv.allowOtherCni).toBe(true);
    });

    it('a file that sorts after ours, or one that is not a CNI configuration, does not stop it', async () => {
      mkdirSync(confDir);
      writeFileSync(join(confDir, '20-aws.conflist'), JSON.stringify(awsNode));
      writeFileSync(join(confDir, '05-aws.conflist.bak'), JSON.stringify(awsNode));
      await install(args('--no-wait-ready'));
      expect(binaries()).toContain('vpc-lease-cni');
    });
  });

  it('parses the wait flags and refuses a bad timeout', () => {
    expect(args()).toMatchObject({ skipReadyWait: false, readyTimeoutS: 0 });
    expect(args('--no-wait-ready', '--ready-timeout-s', '600')).toMatchObject({
      skipReadyWait: true,
      readyTimeoutS: 600,
    });
    expect(() => args('--ready-timeout-s', '10m')).toThrow(/--ready-timeout-s must be a whole number/);
  });

  it.skipIf(missing('go-plugins'))(
    'asks the real reference portmap (Debian 1.1.1 stops at 1.0.0): 1.0.0 only',
    async () => {
      copyFileSync('/usr/lib/cni/portmap', join(binDir, 'portmap'));
      const report = await install(args('--no-wait-ready'));
      expect(conflist()).toMatchObject({ cniVersion: '1.0.0', cniVersions: ['1.0.0'] });
      expect(report.warnings).toEqual([expect.stringMatching(/portmap does not speak 1\.1\.0/)]);
    },
  );

  describe('the conflist appears only once the node is READY', () => {
    /** A fake clock: each sleep advances it; the probe answers from a script, then READY. */
    function scripted(reasons: (string | undefined)[], onProbe: () => void = () => undefined) {
      const clock = { nowMs: 1_000_000, sleeps: [] as number[], probes: 0, lines: [] as string[] };
      const wait: ReadyWait = {
        probe: async () => {
          clock.probes += 1;
          onProbe();
          return reasons.length > 0 ? reasons.shift() : undefined;
        },
        sleep: async (ms) => {
          clock.sleeps.push(ms);
          clock.nowMs += ms;
        },
        nowMs: () => clock.nowMs,
        log: (line) => clock.lines.push(line),
      };
      return { clock, wait };
    }
    const path = () => join(confDir, '10-vpc-lease.conflist');

    it('copies the binaries at once and writes the conflist after READY, polling 1 s doubling to 10 s', async () => {
      const seen: boolean[] = [];
      const notYet = Array.from(
        { length: 6 },
        () => 'the node is not provisioned yet: no node item in the lease table',
      );
      const { clock, wait } = scripted(notYet, () => {
        seen.push(existsSync(join(binDir, 'vpc-lease-cni')) && !existsSync(path()));
      });
      const report = await install(args(), wait);
      expect(seen).toEqual(Array(7).fill(true));
      expect(clock.sleeps).toEqual([1_000, 2_000, 4_000, 8_000, 10_000, 10_000]);
      expect(report.written).toBe('ready');
      expect(read(path())).toMatchObject({ cniVersion: '1.0.0' });
      // Said once, not once per poll.
      expect(clock.lines.filter((l) => l.includes('no node item'))).toHaveLength(1);
    });

    it('gives up after --ready-timeout-s without a conflist (the binaries stay)', async () => {
      const { wait } = scripted(Array(100).fill('the lease store is unreachable: connect ECONNREFUSED'));
      await expect(install(args('--ready-timeout-s', '30'), wait)).rejects.toThrow(
        /not READY after 3\d s \(the lease store is unreachable: connect ECONNREFUSED\); no conflist written/,
      );
      expect(existsSync(path())).toBe(false);
      expect(existsSync(join(binDir, 'vpc-lease-cni'))).toBe(true);
    });

    it('rewrites our existing conflist at once on a rollout, without asking the store; a foreign file there waits', async () => {
      mkdirSync(confDir, { recursive: true });
      writeFileSync(
        path(),
        JSON.stringify({ cniVersion: '1.1.0', name: 'vpc-lease', plugins: [{ type: 'vpc-lease-cni' }] }),
      );
      const ours = scripted(Array(100).fill('the lease store is unreachable'));
      await expect(install(args('--ready-timeout-s', '5'), ours.wait)).resolves.toMatchObject({
        written: 'existing-conflist',
      });
      expect(ours.clock.probes).toBe(0);
      expect(read(path())).toMatchObject({ cniVersion: '1.0.0', cniVersions: ['1.0.0', '1.1.0'] });
      writeFileSync(path(), JSON.stringify({ cniVersion: '1.0.0', name: 'other', plugins: [{ type: 'bridge' }] }));
      const foreign = scripted(Array(100).fill('the lease store is unreachable'));
      await expect(install(args('--ready-timeout-s', '5'), foreign.wait)).rejects.toThrow(/not READY/);
      expect(foreign.clock.probes).toBeGreaterThan(1);
      expect(read(path())).toMatchObject({ name: 'other' });
    });

    it('--no-wait-ready writes at once and never asks', async () => {
      const { clock, wait } = scripted(Array(100).fill('not yet'));
      await expect(install(args('--no-wait-ready'), wait)).resolves.toMatchObject({ written: 'no-wait' });
      expect(clock.probes).toBe(0);
      expect(existsSync(path())).toBe(true);
    });
  });
});
