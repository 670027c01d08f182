import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSea } from '../../packaging/build.js';
import { ociImage } from '../../packaging/image/oci.js';
import { loadInstanceTypes } from '../../shared/data/catalog.js';
import type { Lease } from '../../shared/domain/lease.js';
import { maxPodsFor } from '../../shared/planner/max-pods.js';
import { NodeFixture } from '../node/support/node-fixture.js';
import { missing } from '../support/capabilities.js';
import { ensureTool, goAvailable, toolDir } from '../tools/build.js';
import { CriRuntime } from './support/cri-runtime.js';
import { kubeletBinary, StandaloneKubelet } from './support/kubelet.js';

/** runc and busybox (Debian), and Go or the pinned tools already built. CI=true: anything absent is a failure. */
function kubeletMissing(): string | undefined {
  const base = missing('root', 'netns');
  if (base) return base;
  const absent = ['/usr/sbin/runc', '/bin/busybox'].filter((p) => !existsSync(p));
  const tools = ['containerd', 'crictl', 'cni-plugins', 'kubelet'].filter((t) => !existsSync(toolDir(t)));
  if (tools.length > 0 && !goAvailable()) absent.push(`go (to build ${tools.join(', ')}; npm run tools)`);
  if (absent.length === 0) return undefined;
  const reason = `not installed: ${absent.join(', ')} (apt packages runc, busybox-static; Go)`;
  if (process.env['CI'] === 'true') throw new Error(`CI must run this suite, but: ${reason}`);
  process.stderr.write(`skipping: ${reason}\n`);
  return reason;
}

const skip = kubeletMissing();
const SERVICE_CIDRS = '10.96.0.0/12';
/** Fully qualified, as CRI normalizes the reference a pod names. */
const BUSYBOX = 'localhost/vpc-lease-test/busybox:1';
const NODE_NAME = 'vpc-lease-kubelet';
/** The instance type the fixture's IMDS reports. */
const INSTANCE_TYPE = 'm5.large';
/** The control plane's lease cap (ControlPlaneConfig.maxPods), kept small so the test runs few pods. */
const CAP_PODS = 4;
const execFileAsync = promisify(execFile);
const POD_TIMEOUT_MS = 120_000;

/**
 * A real kubelet (v1.34, standalone: static pods, no API server) drives the installed plugin through
 * containerd 2.x's CRI, with --max-pods set from vpc-lease's figure for the node.
 */
describe.skipIf(skip)('a standalone kubelet on containerd 2.x drives the installed plugin', () => {
  let fixture: NodeFixture;
  let runtime: CriRuntime;
  let kubelet: StandaloneKubelet;
  let maxPods: number;
  let polls = 0;
  let work: string;

  /** Static pods are named `<manifest name>-<node name>`; the plugin records that as the lease's podName. */
  const leaseOf = async (pod: string): Promise<Lease | undefined> =>
    (await fixture.store.listLeases(fixture.arn)).find((l) => l.holder?.podName === `${pod}-${NODE_NAME}`);

  /** Polls the store (200 ms apart, counted) until `check` holds. */
  const until = async <T>(what: string, check: () => Promise<T | undefined>): Promise<T> => {
    const deadline = Date.now() + POD_TIMEOUT_MS;
    for (;;) {
      const value = await check();
      if (value !== undefined) return value;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; kubelet: ${kubelet.log.slice(-2000)}`);
      polls += 1;
      await new Promise((r) => setTimeout(r, 200));
    }
  };

  const podIp = async (pod: string): Promise<string | undefined> => {
    const id = (
      await runtime.crictl(['pods', '-q', '--name', `^${pod}-${NODE_NAME}$`, '--state', 'ready'])
    ).stdout.trim();
    if (!id) return undefined;
    return (await runtime.inspectPod(id)).status.network?.ip || undefined;
  };

  beforeAll(async () => {
    const limits = loadInstanceTypes().get(INSTANCE_TYPE);
    if (!limits) throw new Error(`${INSTANCE_TYPE} is not in the shipped table`);
    maxPods = maxPodsFor(limits, { prefixDelegation: false, capPods: CAP_PODS });
    work = mkdtempSync(join(tmpdir(), 'vpc-lease-kubelet-test-'));
    fixture = await NodeFixture.start();
    await fixture.setPhase('READY');
    const pluginEnv = fixture.baseEnv();
    delete pluginEnv['PATH'];
    runtime = await CriRuntime.start('2.x', pluginEnv, await ensureTool('cni-plugins'));
    const busybox = ociImage({
      files: [{ path: 'bin/busybox', data: readFileSync('/bin/busybox'), mode: 0o755 }],
      entrypoint: ['/bin/busybox', 'sh'],
      name: BUSYBOX,
      gzipLevel: 1,
    });
    const tar = join(work, 'busybox.tar');
    writeFileSync(tar, busybox.tarball);
    const imported = await runtime.containerd.ctr(['images', 'import', tar]);
    if (imported.code !== 0) throw new Error(`ctr images import: ${imported.stderr}`);
    const dist = join(work, 'dist');
    await buildSea(dist, { reuse: true });
    const config = fixture.netconf('1.1.0', { reuseWaitMs: 600_000, maxPodsCap: CAP_PODS });
    for (const k of ['cniVersion', 'name', 'type']) delete config[k];
    // Asynchronous: the installer asks this process's IMDS and store while it waits for READY.
    await execFileAsync(
      join(dist, 'vpc-lease-cni'),
      [
        'install',
        '--bin-dir',
        runtime.binDir,
        '--conf-dir',
        runtime.confDir,
        '--config',
        JSON.stringify(config),
      ].concat(['--service-cidrs', SERVICE_CIDRS, '--ready-timeout-s', '120']),
      { env: fixture.baseEnv() },
    );
    // kubelet gets the figure the node itself reports (instance type from IMDS, the installed conflist).
    const reported = await execFileAsync(
      join(runtime.binDir, 'vpc-lease-cni'),
      ['max-pods', '--conflist', join(runtime.confDir, '10-vpc-lease.conflist')],
      {
        env: fixture.baseEnv(),
      },
    );
    expect(Number(reported.stdout.split('\n')[0])).toBe(maxPods);
    kubelet = new StandaloneKubelet({
      binary: await kubeletBinary(),
      criSocket: runtime.containerd.socket,
      maxPods,
      nodeName: NODE_NAME,
    });
    await kubelet.start();
  }, 900_000);

  afterAll(async () => {
    await kubelet?.close();
    await runtime?.close();
    await fixture?.close();
    if (work) rmSync(work, { recursive: true, force: true });
    process.stderr.write(`kubelet suite: ${polls} store/runtime polls while waiting\n`);
  }, 120_000);

  it('runs static pods on their leased addresses, up to vpc-lease’s max-pods', async () => {
    expect(maxPods).toBe(CAP_PODS);
    const seeded = await fixture.seed(maxPods + 6, 10);
    // One host-network pod (as kube-proxy) counts against max-pods but takes no address.
    kubelet.addStaticPod({
      name: 'agent',
      image: BUSYBOX,
      command: ['/bin/busybox', 'sleep', '3600'],
      hostNetwork: true,
    });
    const pods = Array.from({ length: maxPods - 1 }, (_, i) => `web-${i}`);
    for (const pod of pods)
      kubelet.addStaticPod({ name: pod, image: BUSYBOX, command: ['/bin/busybox', 'sleep', '3600'] });
    const addresses = new Set<string>();
    for (const pod of pods) {
      const lease = await until(`a lease for ${pod}`, () => leaseOf(pod));
      expect(lease).toMatchObject({ state: 'CLAIMED', holder: { podNamespace: 'default', ifName: 'eth0' } });
      expect(seeded).toContain(lease.ip);
      const ip = await until(`${pod}'s sandbox IP`, () => podIp(pod));
      expect(ip).toBe(lease.ip);
      addresses.add(ip);
    }
    expect(addresses.size).toBe(pods.length);
    expect(await leaseOf('agent')).toBeUndefined();
  }, 300_000);

  it('refuses a pod beyond max-pods in kubelet’s own admission: no ADD, no lease', async () => {
    const from = kubelet.log.length;
    kubelet.addStaticPod({ name: 'extra', image: BUSYBOX, command: ['/bin/busybox', 'sleep', '3600'] });
    // Static pods are critical: kubelet first looks for pods to preempt, then denies admission naming the resource.
    const refusal = await kubelet.waitForLog(
      /"Pod admission denied".*pod="default\/extra-vpc-lease-kubelet".*/,
      POD_TIMEOUT_MS,
      from,
    );
    expect(refusal[0]).toMatch(/res: pods|Node didn't have enough resource: pods/);
    // Admission runs before any sandbox exists: the runtime never ran ADD for it.
    expect((await runtime.crictl(['pods', '-q', '--name', 'extra-'])).stdout.trim()).toBe('');
    expect(await leaseOf('extra')).toBeUndefined();
    expect(readFileSync(fixture.logFile, 'utf8')).not.toContain('extra-vpc-lease-kubelet');
  }, 300_000);

  it('deleting a static pod’s manifest runs DEL: its lease goes to COOLDOWN', async () => {
    const before = await until('web-0 lease', () => leaseOf('web-0'));
    kubelet.removeStaticPod('web-0');
    const after = await until('web-0 released', async () => {
      const lease = (await fixture.store.listLeases(fixture.arn)).find((l) => l.ip === before.ip);
      return lease?.state === 'COOLDOWN' ? lease : undefined;
    });
    expect(after.holder).toBeUndefined();
    expect(await leaseOf('extra')).toBeUndefined();
  }, 300_000);

  it('kubelet sees the network as STATUS reports it: DRAINING is not ready with our reason, READY is ready', async () => {
    const from = kubelet.log.length;
    await fixture.setPhase('DRAINING');
    const notReady = await kubelet.waitForLog(/Container runtime network not ready.*/, POD_TIMEOUT_MS, from);
    expect(notReady[0]).toContain('the node is DRAINING');
    // A pod arriving now is admitted (web-0 left a slot) but not started: no sandbox, no ADD.
    kubelet.addStaticPod({ name: 'late', image: BUSYBOX, command: ['/bin/busybox', 'sleep', '3600'] });
    await kubelet.waitForLog(
      /Error syncing pod.*network is not ready.*pod="default\/late-vpc-lease-kubelet"/,
      POD_TIMEOUT_MS,
      from,
    );
    expect(await leaseOf('late')).toBeUndefined();
    const drained = kubelet.log.length;
    await fixture.setPhase('READY');
    await kubelet.waitForLog(/Container runtime status.*NetworkReady=true/, POD_TIMEOUT_MS, drained);
    const lease = await until('a lease for late', () => leaseOf('late'));
    expect(await until("late's sandbox IP", () => podIp('late'))).toBe(lease.ip);
  }, 300_000);
});
