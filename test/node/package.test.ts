import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildCni } from '../../infra/build.js';
import { runProcess } from './support/node-fixture.js';

/** The built artefact as a runtime and the DaemonSet's init container see it: outside the repo, no node_modules. */
describe('the built vpc-lease-cni', () => {
  let dir: string;
  let bin: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'vpc-lease-pkg-'));
    const built = await buildCni(join(dir, 'build'));
    // Somewhere without the repo's node_modules in any parent directory.
    bin = join(dir, 'bin');
    cpSync(join(dir, 'build'), bin, { recursive: true });
    expect(built.endsWith('vpc-lease-cni')).toBe(true);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const env = { PATH: process.env['PATH'] ?? '/usr/bin:/bin' };

  it('is an executable with a shebang, and its bundle carries no AWS SDK', () => {
    const launcher = readFileSync(join(bin, 'vpc-lease-cni'), 'utf8');
    expect(launcher.startsWith('#!/usr/bin/env node\n')).toBe(true);
    expect(statSync(join(bin, 'vpc-lease-cni')).mode & 0o111).toBe(0o111);
    const bundle = readFileSync(join(bin, 'vpc-lease-cni.js'), 'utf8');
    expect(bundle).not.toMatch(/@aws-sdk|@smithy/);
  });

  it('answers VERSION without the netlink binding, and caches its compiled code beside itself', async () => {
    const lean = join(dir, 'lean');
    cpSync(bin, lean, { recursive: true });
    rmSync(join(lean, 'netlink.node'));
    for (let i = 0; i < 2; i++) {
      const r = await runProcess(
        join(lean, 'vpc-lease-cni'),
        [],
        { ...env, CNI_COMMAND: 'VERSION' },
        '{"cniVersion":"1.0.0"}',
      );
      expect(r.code).toBe(0);
      expect(r.json).toMatchObject({
        cniVersion: '1.1.0',
        supportedVersions: expect.arrayContaining(['0.3.1', '1.1.0']),
      });
    }
    expect(readdirSync(lean)).toContain('vpc-lease-cni.base.v8cache');
  });

  it('installs itself and a conflist atomically, refusing a bad configuration before writing anything', async () => {
    const binDir = join(dir, 'opt-cni-bin');
    const confDir = join(dir, 'net.d');
    const bad = await runProcess(
      join(bin, 'vpc-lease-cni'),
      ['install', '--bin-dir', binDir, '--conf-dir', confDir, '--config', '{"mtu": 5}'],
      env,
      '',
    );
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('mtu');
    expect(existsSync(confDir)).toBe(false);
    expect(existsSync(binDir)).toBe(false);

    for (let round = 0; round < 2; round++) {
      const r = await runProcess(
        join(bin, 'vpc-lease-cni'),
        [
          'install',
          '--bin-dir',
          binDir,
          '--conf-dir',
          confDir,
          '--config',
          '{"tableName": "prod-leases", "mtu": 9001}',
          '--service-cidrs',
          '10.96.0.0/12',
        ],
        env,
        '',
      );
      expect(r.code, r.stderr).toBe(0);
    }
    expect(readdirSync(binDir).sort()).toEqual([
      'netlink.node',
      'vpc-lease-cni',
      'vpc-lease-cni.js',
      'vpc_lease_netns.node',
    ]);
    expect(readdirSync(confDir)).toEqual(['10-vpc-lease.conflist']);
    const conflist = JSON.parse(readFileSync(join(confDir, '10-vpc-lease.conflist'), 'utf8'));
    expect(conflist).toEqual({
      cniVersion: '1.0.0',
      name: 'vpc-lease',
      plugins: [
        { type: 'vpc-lease-cni', tableName: 'prod-leases', mtu: 9001, serviceCidrs: ['10.96.0.0/12'] },
        { type: 'portmap', capabilities: { portMappings: true } },
      ],
    });
    const installed = await runProcess(join(binDir, 'vpc-lease-cni'), [], { ...env, CNI_COMMAND: 'VERSION' }, '{}');
    expect(installed.code).toBe(0);
  });
});
