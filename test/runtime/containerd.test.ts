import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSea } from '../../packaging/build.js';
import { imageName, writeInstallerImage } from '../../packaging/image/build-image.js';
import { ociImage } from '../../packaging/image/oci.js';
import { NodeFixture } from '../node/support/node-fixture.js';
import { missing } from '../support/capabilities.js';
import { CTR_NAMESPACE, PrivateContainerd } from './support/containerd.js';

/** containerd, ctr and runc, as Debian's containerd and runc packages install them (CI=true: absent is a failure). */
function runtimeMissing(): string | undefined {
  const base = missing('root', 'netns');
  if (base) return base;
  const absent = ['/usr/bin/containerd', '/usr/bin/ctr', '/usr/sbin/runc', '/bin/busybox'].filter(
    (p) => !existsSync(p),
  );
  if (absent.length === 0) return undefined;
  const reason = `not installed: ${absent.join(', ')} (apt packages containerd, runc, busybox-static)`;
  if (process.env['CI'] === 'true') throw new Error(`CI must run this suite, but: ${reason}`);
  process.stderr.write(`skipping: ${reason}\n`);
  return reason;
}

const skip = runtimeMissing();
const BUSYBOX = 'vpc-lease-test/busybox:1';

/**
 * containerd drives the installed plugin through its own CNI integration (`ctr run --cni`), after the plugin was
 * installed the way the DaemonSet does it: the installer image imported into containerd and its container run
 * against the host's CNI directories. Pods get macvlan links on the fixture's test switch (no ipvlan here).
 */
describe.skipIf(skip)('containerd + runc drive the installed plugin', () => {
  let fixture: NodeFixture;
  let containerd: PrivateContainerd;
  let work: string;
  /** What containerd's CNI calls pass on to the plugin: the test switch's link kind. */
  let pluginEnv: Record<string, string>;

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'vpc-lease-runtime-'));
    fixture = await NodeFixture.start();
    pluginEnv = fixture.baseEnv();
    delete pluginEnv['PATH'];
    const dist = join(work, 'dist');
    await buildSea(dist, { reuse: true });
    const installer = writeInstallerImage(dist, join(work, 'installer.tar'), { gzipLevel: 1 });
    const busybox = ociImage({
      files: [{ path: 'bin/busybox', data: readFileSync('/bin/busybox'), mode: 0o755 }],
      entrypoint: ['/bin/busybox', 'sh'],
      name: BUSYBOX,
      gzipLevel: 1,
    });
    writeFileSync(join(work, 'busybox.tar'), busybox.tarball);
    containerd = new PrivateContainerd();
    await containerd.start();
    for (const image of [installer.path, join(work, 'busybox.tar')]) {
      const r = await containerd.ctr(['images', 'import', image]);
      expect(r.code, r.stderr).toBe(0);
    }
  }, 300_000);

  afterAll(async () => {
    await containerd?.close();
    await fixture?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  }, 60_000);

  /** Leases of the node by state. */
  async function states(): Promise<Record<string, string>> {
    const leases = await fixture.store.listLeases(fixture.arn);
    return Object.fromEntries(leases.map((l) => [l.ip, l.state]));
  }

  let installing: ReturnType<PrivateContainerd['ctr']> | undefined;
  /** The installer run once, by whichever test needs the plugin first: each test stands alone (`-t` any one). */
  function install(): ReturnType<PrivateContainerd['ctr']> {
    installing ??= runInstaller();
    return installing;
  }
  function runInstaller(): ReturnType<PrivateContainerd['ctr']> {
    const config = fixture.netconf('1.0.0', { reuseWaitMs: 600_000 });
    for (const k of ['cniVersion', 'name', 'type']) delete config[k];
    return containerd.ctr([
      'run',
      '--rm',
      '--read-only',
      '--mount',
      'type=bind,src=/opt/cni/bin,dst=/host/opt/cni/bin,options=rbind:rw',
      '--mount',
      'type=bind,src=/etc/cni/net.d,dst=/host/etc/cni/net.d,options=rbind:rw',
      '--env',
      `VPC_LEASE_CNI_CONFIG=${JSON.stringify(config)}`,
      '--env',
      'VPC_LEASE_SERVICE_CIDRS=10.96.0.0/12',
      imageName(),
      'install',
      '/app/vpc-lease-cni',
      'install',
      '--bin-dir',
      '/host/opt/cni/bin',
      '--conf-dir',
      '/host/etc/cni/net.d',
      // Debian's containerd 1.6 vendors libcni 1.1, which parses results up to CNI 1.0.0.
      '--cni-version',
      '1.0.0',
      // portmap is not in this private /opt/cni/bin.
      '--chain',
      '',
      // No node item for this host in the suite's store: the conflist is needed at once.
      '--no-wait-ready',
    ]);
  }

  it('installs the plugin from the imported image, as the DaemonSet init container does', async () => {
    const r = await install();
    expect(r.code, r.stderr).toBe(0);
    expect(readdirSync(containerd.binDir).sort()).toEqual([
      'netlink.node',
      'vpc-lease-cni',
      'vpc-lease-cni-plugin',
      'vpc_lease_netns.node',
    ]);
    const conflist = JSON.parse(readFileSync(join(containerd.confDir, '10-vpc-lease.conflist'), 'utf8'));
    expect(conflist).toMatchObject({ cniVersion: '1.0.0', plugins: [{ type: 'vpc-lease-cni' }] });
  });

  it('gives a container its leased address, and removing the container puts the lease in COOLDOWN', async () => {
    expect((await install()).code).toBe(0);
    const seeded = await fixture.seed(2, 10);
    const r = await containerd.ctr(
      ['run', '--cni', '--rm', BUSYBOX, 'pod-a', '/bin/busybox', 'ip', '-o', '-4', 'addr', 'show', 'eth0'],
      pluginEnv,
    );
    expect(r.code, r.stderr).toBe(0);
    const address = /inet (\d+\.\d+\.\d+\.\d+)\/24/.exec(r.stdout)?.[1];
    expect(seeded).toContain(address);
    // ctr ran DEL when the container exited and was removed: the lease waits out its reuse time.
    const after = await states();
    expect(after[address!]).toBe('COOLDOWN');
    expect(Object.values(after).filter((s) => s === 'CLAIMED')).toEqual([]);
    // The holder was containerd's full container id: the namespace, then the container's name.
    const log = readFileSync(fixture.logFile, 'utf8');
    expect(log).toContain(`"containerId":"${CTR_NAMESPACE}-pod-a"`);
  });

  it('restarting containerd under a running container leaks no lease and claims no second one', async () => {
    expect((await install()).code).toBe(0);
    // Leases of its own to claim from, whatever ran before it.
    await fixture.seed(2, 20);
    const before = await states();
    const run = containerd.ctrBackground(
      ['run', '--cni', '--rm', BUSYBOX, 'pod-b', '/bin/busybox', 'sleep', '30'],
      pluginEnv,
    );
    let claimed: string[] = [];
    for (let i = 0; i < 100 && claimed.length === 0; i++) {
      await new Promise((r) => setTimeout(r, 200));
      claimed = Object.entries(await states())
        .filter(([ip, s]) => s === 'CLAIMED' && before[ip] === 'FREE')
        .map(([ip]) => ip);
    }
    expect(claimed).toHaveLength(1);
    // ADD runs between task create and start: restart only once the container runs.
    for (let i = 0; i < 100 && !/pod-b\s+\d+\s+RUNNING/.test((await containerd.ctr(['tasks', 'ls'])).stdout); i++)
      await new Promise((r) => setTimeout(r, 100));
    await containerd.stop();
    await containerd.start();
    // The container survived the restart in its shim.
    const tasks = await containerd.ctr(['tasks', 'ls']);
    expect(tasks.stdout).toMatch(/pod-b\s+\d+\s+RUNNING/);
    // ctr's CNI runs in the client, not the daemon: the `ctr run` that lost its daemon tears the network down
    // (DEL) on its way out. Either way no other lease was claimed and none stays CLAIMED once the pod is gone.
    const lost = await Promise.race([run.done, new Promise<undefined>((r) => setTimeout(() => r(undefined), 5_000))]);
    await containerd.ctr(['tasks', 'kill', '-s', 'KILL', 'pod-b']);
    await containerd.ctr(['tasks', 'rm', '-f', 'pod-b']);
    await containerd.ctr(['containers', 'rm', 'pod-b']);
    const ended = lost ?? (await run.done);
    expect(ended.stderr + ended.stdout).not.toContain('failed (delete)');
    const final = await states();
    expect(final[claimed[0]!]).toBe('COOLDOWN');
    expect(Object.values(final).filter((s) => s === 'CLAIMED')).toEqual([]);
    // Exactly one lease left FREE during this test: the one pod-b claimed.
    expect(Object.keys(final).filter((ip) => before[ip] === 'FREE' && final[ip] !== 'FREE')).toEqual([claimed[0]]);
  }, 90_000);
});
