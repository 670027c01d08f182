import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildCni, buildSea } from '../../packaging/build.js';
import { missing } from '../support/capabilities.js';
import { runWithoutNode } from '../support/plugin-process.js';
import { NodeFixture, runProcess } from './support/node-fixture.js';

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
      ['install', '--no-wait-ready', '--bin-dir', binDir, '--conf-dir', confDir, '--config', '{"mtu": 5}'],
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
          '--no-wait-ready',
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
      'vpc-lease-cni-plugin',
      'vpc-lease-cni.js',
      'vpc_lease_netns.node',
    ]);
    expect(readdirSync(confDir)).toEqual(['10-vpc-lease.conflist']);
    const conflist = JSON.parse(readFileSync(join(confDir, '10-vpc-lease.conflist'), 'utf8'));
    expect(conflist).toEqual({
      cniVersion: '1.0.0',
      cniVersions: ['1.0.0', '1.1.0'],
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

/** Every Node binary this machine has: masked in the namespace that stands for a node without Node.js. */
const NODE_BINARIES = [
  '/usr/bin/node',
  '/usr/local/bin/node',
  resolve('node_modules/.bin/node'),
  realpathSync(process.execPath),
].filter((p) => existsSync(p));
const withoutNode = (file: string, args: readonly string[], env: Record<string, string>, stdin: string) =>
  runWithoutNode(NODE_BINARIES, file, args, env, stdin);

const seaSkip = missing('root', 'netns');

/** The single executable as a node runs it: installed by its own installer, on a host with no Node.js. */
describe.skipIf(seaSkip)('the single executable vpc-lease-cni, on a host without Node.js', () => {
  let dir: string;
  let binDir: string;
  let confDir: string;
  let fixture: NodeFixture;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'vpc-lease-sea-pkg-'));
    await buildSea(join(dir, 'build'), { reuse: true });
    binDir = join(dir, 'opt-cni-bin');
    confDir = join(dir, 'net.d');
    fixture = await NodeFixture.start();
  }, 240_000);
  afterAll(async () => {
    await fixture?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('masks every Node binary: node cannot run in that namespace (the control)', async () => {
    const viaPath = await withoutNode('/usr/bin/env', ['node', '-e', 'process.exit(0)'], {}, '');
    expect(viaPath.code).not.toBe(0);
    for (const node of NODE_BINARIES) {
      const direct = await withoutNode('/usr/bin/env', [node, '-e', 'process.exit(0)'], {}, '');
      expect(direct.code, node).not.toBe(0);
    }
    // The same wrapper runs an ordinary program, so the failures above are Node's absence, not the wrapper's.
    expect((await withoutNode('/bin/true', [], {}, '')).code).toBe(0);
  });

  it('installs itself with its natives and a conflist, and answers VERSION, with no Node.js', async () => {
    const config = JSON.stringify({ tableName: 'prod-leases' });
    const build = join(dir, 'build', 'vpc-lease-cni');
    const r = await withoutNode(
      build,
      [
        'install',
        '--no-wait-ready',
        '--bin-dir',
        binDir,
        '--conf-dir',
        confDir,
        '--config',
        config,
        '--service-cidrs',
        '10.96.0.0/12',
      ],
      {},
      '',
    );
    expect(r.code, r.stderr).toBe(0);
    expect(readdirSync(binDir).sort()).toEqual([
      'netlink.node',
      'vpc-lease-cni',
      'vpc-lease-cni-plugin',
      'vpc_lease_netns.node',
    ]);
    const conflist = JSON.parse(readFileSync(join(confDir, '10-vpc-lease.conflist'), 'utf8'));
    expect(conflist.plugins[0]).toEqual({
      type: 'vpc-lease-cni',
      tableName: 'prod-leases',
      serviceCidrs: ['10.96.0.0/12'],
    });
    const version = await withoutNode(join(binDir, 'vpc-lease-cni'), [], { CNI_COMMAND: 'VERSION' }, '{}');
    expect(version.code, version.stderr).toBe(0);
    expect(version.json).toMatchObject({ cniVersion: '1.1.0', supportedVersions: expect.arrayContaining(['1.1.0']) });
    // Nothing of the AWS SDK made it into the executable's snapshot.
    expect(readFileSync(join(binDir, 'vpc-lease-cni')).includes('@aws-sdk/')).toBe(false);
  });

  it('ADDs and DELs a pod against the local cloud with no Node.js, loading its natives from beside itself', async () => {
    const [ip] = await fixture.seed(1);
    const netns = fixture.addNetns();
    const env = (command: string): Record<string, string> => ({
      ...fixture.baseEnv(),
      CNI_COMMAND: command,
      CNI_CONTAINERID: 'sea0',
      CNI_IFNAME: 'eth0',
      CNI_NETNS: netns,
      CNI_PATH: binDir,
    });
    const netconf = JSON.stringify(fixture.netconf('1.1.0'));
    const add = await withoutNode(join(binDir, 'vpc-lease-cni'), [], env('ADD'), netconf);
    expect(add.code, add.stderr + add.stdout).toBe(0);
    expect(add.json).toMatchObject({ ips: [{ address: `${ip}/24` }] });
    expect(fixture.podLinks(netns)).toContain('eth0');
    expect((await fixture.store.getLease(fixture.arn, ip!))?.state).toBe('CLAIMED');
    const del = await withoutNode(join(binDir, 'vpc-lease-cni'), [], env('DEL'), netconf);
    expect(del.code, del.stderr + del.stdout).toBe(0);
    expect(fixture.podLinks(netns)).toEqual([]);
    expect((await fixture.store.getLease(fixture.arn, ip!))?.state).not.toBe('CLAIMED');
  });
});
