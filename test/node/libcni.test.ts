import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NodeRecord } from '../../shared/domain/node.js';
import { missing } from '../support/capabilities.js';
import { buildLibcniDriver, goMissing, type LibcniFlavour } from './support/libcni-driver.js';
import { NodeFixture, runProcess } from './support/node-fixture.js';

/**
 * The installer's own conflist, driven through real libcni as container runtimes embed it: libcni 1.1.2
 * (Debian's; containerd 1.6/1.7), which reads only `cniVersion` and knows results up to 1.0.0, and libcni 1.3.0
 * (containerd 2, CRI-O), which takes the highest of `cniVersions` it implements and then runs GC and STATUS.
 */
const skip = missing('root', 'netns', 'go-plugins') ?? goMissing();

describe.skipIf(skip)('the installed conflist through real libcni 1.1 and 1.3', () => {
  let f: NodeFixture;
  const drivers = {} as Record<LibcniFlavour, string>;
  beforeAll(async () => {
    drivers['1.1'] = buildLibcniDriver('1.1');
    drivers['1.3'] = buildLibcniDriver('1.3');
    f = await NodeFixture.start();
    await f.seed(12);
    const node: NodeRecord = {
      instanceArn: f.arn,
      instanceId: f.imds.instanceId,
      instanceType: 'm5.large',
      availabilityZone: 'us-east-1a',
      podSubnetIds: [],
      phase: 'READY',
      enis: [],
      maxPods: 29,
      createdAtMs: Date.now(),
      updatedAtMs: Date.now(),
      version: 1,
    };
    await f.store.createNode(node);
  }, 300_000);
  afterAll(async () => {
    await f?.close();
  });

  /** Runs `vpc-lease-cni install` (the built CLI) into a fresh bin and conf dir; returns the conflist path. */
  async function installed(name: string, chain: 'portmap' | '', extraArgs: string[] = []) {
    const binDir = join(f.dir, `${name}-bin`);
    const confDir = join(f.dir, `${name}-net.d`);
    mkdirSync(binDir, { recursive: true });
    if (chain === 'portmap') copyFileSync('/usr/lib/cni/portmap', join(binDir, 'portmap'));
    const config = f.netconf('1.0.0', { gcGraceMs: 0 });
    for (const key of ['cniVersion', 'name', 'type']) delete config[key];
    const run = await runProcess(
      f.cni,
      [
        'install',
        ...['--bin-dir', binDir, '--conf-dir', confDir, '--service-cidrs', '10.96.0.0/12', '--chain', chain],
        ...['--config', JSON.stringify(config), ...extraArgs],
      ],
      f.baseEnv(),
      '',
    );
    expect(run.code, run.stderr).toBe(0);
    const conflist = join(confDir, '10-vpc-lease.conflist');
    return { binDir, conflist, body: JSON.parse(readFileSync(conflist, 'utf8')), stderr: run.stderr };
  }

  function driver(flavour: LibcniFlavour, conflist: string, binDir: string, ...args: string[]) {
    const env = { ...f.baseEnv(), CNI_PATH: binDir, CNI_CACHE_DIR: join(f.dir, `cache-${flavour}`) };
    return runProcess(drivers[flavour], [conflist, ...args], env, '');
  }

  async function addCheckDel(flavour: LibcniFlavour, conflist: string, binDir: string, containerId: string) {
    const netns = f.addNetns();
    const add = await driver(flavour, conflist, binDir, 'add', containerId, netns, 'eth0');
    expect(add.code, add.stderr).toBe(0);
    const result = JSON.parse(add.stdout) as { cniVersion: string; ips: { address: string }[] };
    const lease = await f.store.findByHolder(f.arn, containerId, 'eth0');
    expect(result.ips[0]?.address).toBe(`${lease?.ip}/24`);
    const check = await driver(flavour, conflist, binDir, 'check', containerId, netns, 'eth0');
    expect(check.code, check.stderr).toBe(0);
    const del = await driver(flavour, conflist, binDir, 'del', containerId, netns, 'eth0');
    expect(del.code, del.stderr).toBe(0);
    expect((await f.store.getLease(f.arn, lease!.ip))?.state).toBe('COOLDOWN');
    return result;
  }

  it('without a chained plugin: 1.0.0 through libcni 1.1, 1.1.0 with STATUS and GC through libcni 1.3', async () => {
    const { binDir, conflist, body } = await installed('plain', '');
    expect(body).toMatchObject({ cniVersion: '1.0.0', cniVersions: ['1.0.0', '1.1.0'] });
    expect(JSON.parse((await driver('1.1', conflist, binDir, 'version')).stdout)).toEqual({ cniVersion: '1.0.0' });
    expect((await addCheckDel('1.1', conflist, binDir, 'lc11-a')).cniVersion).toBe('1.0.0');

    expect(JSON.parse((await driver('1.3', conflist, binDir, 'version')).stdout)).toEqual({ cniVersion: '1.1.0' });
    expect((await addCheckDel('1.3', conflist, binDir, 'lc13-a')).cniVersion).toBe('1.1.0');
    const status = await driver('1.3', conflist, binDir, 'status');
    expect(status.code, status.stderr).toBe(0);
    // GC: two pods, the runtime lists one as alive; the other's lease comes back.
    const [live, dead] = [f.addNetns(), f.addNetns()];
    for (const [id, netns] of [
      ['lc13-live', live],
      ['lc13-dead', dead],
    ] as const)
      expect((await driver('1.3', conflist, binDir, 'add', id, netns, 'eth0')).code).toBe(0);
    const deadIp = (await f.store.findByHolder(f.arn, 'lc13-dead', 'eth0'))!.ip;
    const gc = await driver('1.3', conflist, binDir, 'gc', 'lc13-live/eth0');
    expect(gc.code, gc.stderr).toBe(0);
    expect((await f.store.getLease(f.arn, deadIp))?.state).toBe('COOLDOWN');
    expect((await f.store.findByHolder(f.arn, 'lc13-live', 'eth0'))?.state).toBe('CLAIMED');
    expect((await driver('1.3', conflist, binDir, 'del', 'lc13-live', live, 'eth0')).code).toBe(0);
  }, 180_000);

  it('STATUS through libcni 1.3 reaches the plugin: a DRAINING node fails it with code 50', async () => {
    const { binDir, conflist } = await installed('drain', '');
    const node = (await f.store.getNode(f.arn))!;
    await f.store.updateNode({ ...node, phase: 'DRAINING' }, node.version);
    try {
      const status = await driver('1.3', conflist, binDir, 'status');
      expect(status.code).toBe(1);
      expect(status.stderr).toMatch(/vpc-lease cannot serve ADD on this node.*DRAINING/);
    } finally {
      const now = (await f.store.getNode(f.arn))!;
      await f.store.updateNode({ ...now, phase: 'READY' }, now.version);
    }
    expect((await driver('1.3', conflist, binDir, 'status')).code).toBe(0);
  }, 120_000);

  it("with Debian's portmap (stops at 1.0.0) chained: 1.0.0 through both libcni versions, no STATUS delivered", async () => {
    const { binDir, conflist, body, stderr } = await installed('portmap', 'portmap');
    expect(body).toMatchObject({ cniVersion: '1.0.0', cniVersions: ['1.0.0'] });
    expect(stderr).toMatch(/warning: portmap does not speak 1\.1\.0: .*without GC and STATUS/);
    expect((await addCheckDel('1.1', conflist, binDir, 'pm11-a')).cniVersion).toBe('1.0.0');
    expect(JSON.parse((await driver('1.3', conflist, binDir, 'version')).stdout)).toEqual({ cniVersion: '1.0.0' });
    expect((await addCheckDel('1.3', conflist, binDir, 'pm13-a')).cniVersion).toBe('1.0.0');
    // At 1.0.0 libcni 1.3 does not deliver STATUS: even a DRAINING node's list reports ready.
    const node = (await f.store.getNode(f.arn))!;
    await f.store.updateNode({ ...node, phase: 'DRAINING' }, node.version);
    try {
      expect((await driver('1.3', conflist, binDir, 'status')).code).toBe(0);
    } finally {
      const now = (await f.store.getNode(f.arn))!;
      await f.store.updateNode({ ...now, phase: 'READY' }, now.version);
    }
  }, 180_000);

  it('negative controls: the conflists the installer no longer writes fail exactly as the issue says', async () => {
    const { binDir, conflist, body } = await installed('controls', 'portmap');
    // The old default, cniVersion 1.1.0: libcni 1.1 cannot read the plugin's 1.1.0 result.
    const old = join(f.dir, 'old.conflist');
    writeFileSync(old, JSON.stringify({ ...body, cniVersion: '1.1.0', cniVersions: undefined }));
    const netns = f.addNetns();
    const add = await driver('1.1', old, binDir, 'add', 'ctl-old', netns, 'eth0');
    expect(add.code).toBe(1);
    expect(add.stderr).toMatch(/unsupported CNI result version "1\.1\.0"/);
    await driver('1.1', conflist, binDir, 'del', 'ctl-old', netns, 'eth0');
    // Offering 1.1.0 beside a chained plugin that stops at 1.0.0: libcni 1.3 picks 1.1.0 without asking, and
    // portmap refuses it.
    const offered = join(f.dir, 'offered.conflist');
    writeFileSync(offered, JSON.stringify({ ...body, cniVersions: ['1.0.0', '1.1.0'] }));
    const netns2 = f.addNetns();
    const add2 = await driver('1.3', offered, binDir, 'add', 'ctl-offered', netns2, 'eth0');
    expect(add2.code).toBe(1);
    expect(add2.stderr).toMatch(/incompatible CNI versions/);
    await driver('1.3', conflist, binDir, 'del', 'ctl-offered', netns2, 'eth0');
  }, 180_000);
});
