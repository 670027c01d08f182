import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { install, installOptionsFromArgs } from '../../node/installer/install.js';

/** The service CIDR is essential: the installer takes it from --service-cidrs (or the env) or refuses. */
describe('installer: service CIDR', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  const args = (dir: string, extra: string[] = []): string[] => [
    '--bin-dir',
    join(dir, 'bin'),
    '--conf-dir',
    join(dir, 'net.d'),
    '--config',
    '{"mode": "l2"}',
    ...extra,
  ];

  it('refuses the shipped config without one, naming the flag, before writing anything', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vpc-install-'));
    dirs.push(dir);
    const options = installOptionsFromArgs(args(dir), {}, '/nonexistent/vpc-lease-cni');
    await expect(install(options)).rejects.toThrow(/--service-cidrs .*--service-cluster-ip-range/);
    expect(existsSync(join(dir, 'bin'))).toBe(false);
    expect(existsSync(join(dir, 'net.d'))).toBe(false);
  });

  it('takes it from the flag, or from VPC_LEASE_SERVICE_CIDRS as the DaemonSet sets it', () => {
    const fromFlag = installOptionsFromArgs(args('/x', ['--service-cidrs', '10.96.0.0/12,172.20.0.0/16']), {}, 's');
    expect(fromFlag.pluginConfig['serviceCidrs']).toEqual(['10.96.0.0/12', '172.20.0.0/16']);
    const fromEnv = installOptionsFromArgs(args('/x'), { VPC_LEASE_SERVICE_CIDRS: '10.100.0.0/16' }, 's');
    expect(fromEnv.pluginConfig['serviceCidrs']).toEqual(['10.100.0.0/16']);
    const empty = installOptionsFromArgs(args('/x'), { VPC_LEASE_SERVICE_CIDRS: '' }, 's');
    expect(empty.pluginConfig['serviceCidrs']).toBeUndefined();
  });

  it('needs none when the pod has no host veth (it could not route them anyway)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vpc-install-'));
    dirs.push(dir);
    const options = installOptionsFromArgs(
      ['--bin-dir', join(dir, 'bin'), '--conf-dir', join(dir, 'net.d'), '--config', '{"hostVeth": false}'],
      {},
      '/nonexistent/vpc-lease-cni',
    );
    // Past the service-CIDR check: it fails on the missing executable instead.
    await expect(install(options)).rejects.toThrow(/ENOENT|no such file/);
  });
});
