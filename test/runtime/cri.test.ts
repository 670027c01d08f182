import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSea } from '../../packaging/build.js';
import type { Lease } from '../../shared/domain/lease.js';
import { NodeFixture } from '../node/support/node-fixture.js';
import { runPluginProcess } from '../support/plugin-process.js';
import { ensureTool } from '../tools/build.js';
import { criMissing } from './support/cri-capabilities.js';
import { type CriGeneration, CriRuntime } from './support/cri-runtime.js';

const skip = criMissing();
const SERVICE_CIDRS = '10.96.0.0/12';
/** Polls of the runtime or the store taken while waiting for an event, per suite: reported, never silent. */
const polls: Record<string, number> = {};

async function waitFor<T>(generation: CriGeneration, what: string, probe: () => Promise<T | undefined>): Promise<T> {
  for (let i = 0; i < 600; i++) {
    const value = await probe();
    if (value !== undefined) {
      if (i > 0) polls[`${generation}: ${what}`] = (polls[`${generation}: ${what}`] ?? 0) + i;
      return value;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${generation}: ${what}: not within 60 s`);
}

afterAll(() => {
  if (Object.keys(polls).length > 0) process.stderr.write(`cri.test polls while waiting: ${JSON.stringify(polls)}\n`);
});

/**
 * One containerd generation with its CRI plugin, the plugin installed into its CNI dirs the way the DaemonSet's
 * init container does (the built executable's `install`, the installer's default conflist), then driven with
 * crictl the way kubelet drives the runtime. Pods get macvlan links on the fixture's test switch (no ipvlan here).
 */
function criSuite(generation: CriGeneration, extra?: (ctx: () => SuiteContext) => void): void {
  describe.skipIf(skip)(`containerd ${generation} over CRI drives the installed plugin`, () => {
    let fixture: NodeFixture;
    let runtime: CriRuntime;
    let work: string;

    beforeAll(async () => {
      work = mkdtempSync(join(tmpdir(), 'vpc-lease-cri-'));
      fixture = await NodeFixture.start();
      await fixture.setPhase('READY');
      await fixture.seed(12, 10);
      const pluginEnv = fixture.baseEnv();
      delete pluginEnv['PATH'];
      // A 1.6 node keeps Debian's CNI plugins (they speak up to 1.0.0); a 2.x node has current ones (1.1.0).
      const cniPlugins = generation === '2.x' ? await ensureTool('cni-plugins') : '/usr/lib/cni';
      runtime = await CriRuntime.start(generation, pluginEnv, cniPlugins);
      const dist = join(work, 'dist');
      await buildSea(dist, { reuse: true });
      const config = fixture.netconf('1.0.0', { reuseWaitMs: 600_000 });
      for (const k of ['cniVersion', 'name', 'type']) delete config[k];
      // Not execFileSync: the installer waits for READY through the fixture's IMDS and store in this process.
      const installed = await runPluginProcess(
        join(dist, 'vpc-lease-cni'),
        [
          'install',
          '--bin-dir',
          runtime.binDir,
          '--conf-dir',
          runtime.confDir,
          '--config',
          JSON.stringify(config),
          '--service-cidrs',
          SERVICE_CIDRS,
          // The node is READY already; a hang here would mean the installer cannot see that.
          '--ready-timeout-s',
          '60',
        ],
        fixture.baseEnv(),
        '',
      );
      expect(installed.code, installed.stderr).toBe(0);
      // CRI loads the conflist when its directory changes; kubelet likewise waits for NetworkReady.
      await waitFor(generation, 'NetworkReady after install', async () =>
        (await runtime.networkReady()).status ? true : undefined,
      );
    }, 900_000);

    afterAll(async () => {
      await runtime?.close();
      await fixture?.close();
      if (work) rmSync(work, { recursive: true, force: true });
    }, 120_000);

    const leases = async (): Promise<Lease[]> => fixture.store.listLeases(fixture.arn);
    const heldBy = async (sandboxId: string): Promise<Lease[]> =>
      (await leases()).filter((l) => l.state === 'CLAIMED' && l.holder?.containerId === sandboxId);

    it('installs the plugin and a conflist the runtime loads', async () => {
      expect(readdirSync(runtime.binDir)).toEqual(expect.arrayContaining(['vpc-lease-cni', 'portmap', 'loopback']));
      const [name] = readdirSync(runtime.confDir).filter((f) => f.endsWith('.conflist'));
      const conflist = JSON.parse(readFileSync(join(runtime.confDir, name!), 'utf8'));
      expect(conflist.plugins.map((p: { type: string }) => p.type)).toEqual(['vpc-lease-cni', 'portmap']);
      expect(conflist.plugins[0].serviceCidrs).toEqual([SERVICE_CIDRS]);
      // libcni 1.1 (containerd 1.6) reads cniVersion; libcni 1.3 (2.x) takes 1.1.0 from cniVersions, and so STATUS,
      // offered only where the chained portmap speaks it too.
      expect(conflist.cniVersion).toBe('1.0.0');
      if (generation === '2.x') expect(conflist.cniVersions).toContain('1.1.0');
      else expect(conflist.cniVersions ?? []).not.toContain('1.1.0');
      expect(await runtime.networkReady()).toMatchObject({ status: true });
    });

    it("runp runs ADD with the pod's K8S_POD_* args, and inspectp reports the leased address", async () => {
      const id = await runtime.runPod('web-0', 'team-a');
      try {
        const held = await heldBy(id);
        expect(held).toHaveLength(1);
        expect(held[0]!.holder).toMatchObject({
          containerId: id,
          ifName: 'eth0',
          podNamespace: 'team-a',
          podName: 'web-0',
        });
        expect((await runtime.inspectPod(id)).status.network?.ip).toBe(held[0]!.ip);
        // libcni's cache records what the runtime passed the plugin, K8S_POD_INFRA_CONTAINER_ID included.
        const cached = JSON.parse(
          readFileSync(join(runtime.containerd.cniCacheDir, 'results', `vpc-lease-${id}-eth0`), 'utf8'),
        );
        expect(Object.fromEntries(cached.cniArgs as [string, string][])).toMatchObject({
          K8S_POD_NAMESPACE: 'team-a',
          K8S_POD_NAME: 'web-0',
          K8S_POD_INFRA_CONTAINER_ID: id,
        });
      } finally {
        await runtime.removePod(id);
      }
    });

    it('stopp runs DEL: the lease goes to COOLDOWN, and rmp leaves it there', async () => {
      const id = await runtime.runPod('web-1', 'team-a');
      const [held] = await heldBy(id);
      expect(held).toBeDefined();
      await runtime.crictl(['stopp', id]).then((r) => expect(r.code, r.stderr).toBe(0));
      expect((await fixture.store.getLease(fixture.arn, held!.ip))?.state).toBe('COOLDOWN');
      await runtime.crictl(['rmp', id]).then((r) => expect(r.code, r.stderr).toBe(0));
      expect(await runtime.pods()).not.toContain(id);
      expect((await fixture.store.getLease(fixture.arn, held!.ip))?.state).toBe('COOLDOWN');
      expect(await heldBy(id)).toEqual([]);
    });

    it('restarting the runtime under a running pod leaks no lease and claims no second one', async () => {
      const before = new Set((await leases()).filter((l) => l.state !== 'FREE').map((l) => l.ip));
      const id = await runtime.runPod('web-2', 'team-b');
      const [held] = await heldBy(id);
      expect(held).toBeDefined();
      await runtime.restart();
      // The sandbox survived in its shim and the runtime recovered it, still on its one lease (containerd 1.6
      // recovers no pod IP after a restart, so the store, not inspectp, is the witness here).
      expect((await runtime.inspectPod(id)).status.state).toBe('SANDBOX_READY');
      expect((await heldBy(id)).map((l) => l.ip)).toEqual([held!.ip]);
      await runtime.removePod(id);
      const after = await leases();
      expect(after.find((l) => l.ip === held!.ip)?.state).toBe('COOLDOWN');
      // Exactly one lease left FREE in this test, and nothing of this pod is held.
      expect(after.filter((l) => l.state !== 'FREE' && !before.has(l.ip)).map((l) => l.ip)).toEqual([held!.ip]);
      expect(after.filter((l) => l.state === 'CLAIMED' && l.holder?.podName === 'web-2')).toEqual([]);
    }, 120_000);

    extra?.(() => ({ fixture, runtime }));
  });
}

interface SuiteContext {
  readonly fixture: NodeFixture;
  readonly runtime: CriRuntime;
}

criSuite('1.6');

/**
 * containerd 2.4 asks the network plugins for STATUS on every CRI Status call (go-cni Status →
 * libcni GetStatusNetworkList) and reports the answer as NetworkReady. It does not call CNI GC: go-cni v1.1.14,
 * which it vendors, has no GC method, so a stale attachment's lease is left to the plugin's own GC paths
 * (support for the GC verb is containerd/go-cni#131, open; discussed in containerd/containerd#12130).
 */
criSuite('2.x', (ctx) => {
  it("carries the plugin's STATUS to the runtime's NetworkReady: READY true, DRAINING false with our reason, back", async () => {
    const { fixture, runtime } = ctx();
    try {
      expect(await runtime.networkReady()).toMatchObject({ status: true });
      await fixture.setPhase('DRAINING');
      const draining = await runtime.networkReady();
      expect(draining).toMatchObject({ status: false, reason: 'NetworkPluginNotReady' });
      expect(draining.message).toMatch(/the node is DRAINING/);
    } finally {
      await fixture.setPhase('READY');
    }
    expect(await runtime.networkReady()).toMatchObject({ status: true });
  });
});
