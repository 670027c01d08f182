import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSea } from '../../packaging/build.js';
import { writeInstallerImage } from '../../packaging/image/build-image.js';
import { DAEMONSET_FILE, renderDaemonSet } from '../../packaging/image/render-daemonset.js';
import type { Lease } from '../../shared/domain/lease.js';
import { parseManifest } from '../infra/support/manifest.js';
import { NodeFixture } from '../node/support/node-fixture.js';
import { ensureTool } from '../tools/build.js';
import { type AgentCounts, agentCounts, interruptedWave, sample, type WaveNode } from './support/agent-wave.js';
import { NODE_RUN } from './support/containerd.js';
import { criMissing } from './support/cri-capabilities.js';
import { CriRuntime } from './support/cri-runtime.js';
import { CriPod, type PodOptions, type PodSpec } from './support/pod-cri.js';

const skip = criMissing();
const SERVICE_CIDRS = '10.96.0.0/12';
/** Fully qualified, so CRI's reference normalization finds the imported name as is. */
const AGENT_IMAGE = 'localhost/vpc-lease-test/vpc-lease-cni:agent-cri';
/** The agent's pid in its container: the DaemonSet shares no pid namespace with it (no hostPID). */
const AGENT_PID = 1;
/** Where the suite's setup spends its time (printed, for the suite's run-time budget). */
const setupMs: Record<string, number> = {};
/** Polls taken while waiting for an event (the store, a log line, a container's state): reported, never silent. */
const polls: Record<string, number> = {};

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (let i = 0; ; i++) {
    const value = await probe();
    if (value !== undefined) {
      if (i > 0) polls[what] = (polls[what] ?? 0) + i;
      return value;
    }
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe.skipIf(skip)('the agent as the DaemonSet runs it, under containerd 2.x, serving pods through the shim', () => {
  let fixture: NodeFixture;
  let runtime: CriRuntime;
  let work: string;
  let spec: PodSpec;
  let agentPod: CriPod;
  let metricsUrl: string;
  let podCounter = 0;
  let podOptions: PodOptions;
  /** The ConfigMap's dataDir: the journal and the fallback records, on the host, shared with the agent. */
  let dataDir: string;

  /** The agent container's CRI log so far (CRI prefixes each line with time, stream and tag). */
  const agentLog = (pod: CriPod): string => {
    try {
      return readFileSync(pod.logFile('agent'), 'utf8');
    } catch {
      return '';
    }
  };

  /** Starts (again) the pod's agent container and waits until it serves: its socket and metrics listening. */
  async function startAgent(pod: CriPod, env: Record<string, string> = {}): Promise<string> {
    await pod.start('agent', env);
    const line = await until('agent listening', async () => {
      if (env['VPC_LEASE_TEST_HANG_AT']) return agentLog(pod).includes('"agent listening"') ? '' : undefined;
      const log = agentLog(pod);
      // An agent that cannot start (its socket directory not writable, say) says why and exits: fail with that.
      const failed = log.split('\n').find((l) => l.includes('"agent failed to start"'));
      if (failed) throw new Error(`the agent container did not start: ${failed}`);
      if (!log.includes('"agent listening"')) return undefined;
      return log.split('\n').find((l) => l.includes('"msg":"metrics listening"'));
    });
    if (line === '') return ''; // an agent made to hang: nothing more is asked of it
    const url = (JSON.parse(line.slice(line.indexOf('{'))) as { url: string }).url;
    // The manifest's readiness probe, run the way kubelet runs an exec probe: in the agent's container.
    const command = pod.spec.containers.find((c) => c.name === 'agent')?.readinessProbe?.exec?.command;
    expect(command).toBeDefined();
    const ready = await until('the readiness probe', async () => {
      const r = await pod.exec('agent', command!);
      return r.code === 0 ? r : undefined;
    });
    expect(ready.stdout).toContain('ready serving');
    return url;
  }

  /**
   * Scrapes until the plugins' fallback records are all counted (the agent drains them in two steps at least a
   * second apart: node/README.md, "Fallback executions"), then returns the counts.
   */
  async function settledCounts(what: string): Promise<AgentCounts> {
    const records = join(dataDir, 'fallback-records.jsonl');
    return until(`${what}: fallback records counted`, async () => {
      const c = agentCounts(await (await fetch(metricsUrl)).text());
      const left = await runtime.containerd.inNamespace([
        'sh',
        '-c',
        'test -e "$1" || test -e "$1".draining',
        'sh',
        records,
      ]);
      return left.code === 0 ? undefined : c;
    });
  }

  /** A file of the node (the runtime's mount namespace), e.g. the plugin log at the netconf's path. */
  async function nodeFile(path: string): Promise<string> {
    const r = await runtime.containerd.inNamespace(['cat', path]);
    return r.code === 0 ? r.stdout : '';
  }

  beforeAll(async () => {
    let mark = Date.now();
    const phase = (name: string) => {
      setupMs[name] = Date.now() - mark;
      mark = Date.now();
    };
    work = mkdtempSync(join(tmpdir(), 'vpc-lease-agent-cri-'));
    fixture = await NodeFixture.start();
    await fixture.setPhase('READY');
    await fixture.seed(24, 10);
    const dist = join(work, 'dist');
    phase('fixture');
    // The agent is made to hang at a fault point: the development build.
    await buildSea(dist, { reuse: true, faults: true });
    phase('build');
    const image = writeInstallerImage(dist, join(work, 'image.tar'), { name: AGENT_IMAGE, gzipLevel: 1 });
    const pluginEnv = fixture.baseEnv();
    delete pluginEnv['PATH'];
    runtime = await CriRuntime.start('2.x', pluginEnv, await ensureTool('cni-plugins'), {
      netnsUnderStateDir: false,
      nsSetup: NODE_RUN,
    });
    const imported = await runtime.containerd.ctr(['images', 'import', image.path]);
    expect(imported.code, imported.stderr).toBe(0);
    phase('image and runtime');

    // The DaemonSet and its ConfigMap as `npm run -s daemonset` renders them, with the fixture's store and IMDS
    // in the ConfigMap's config (its dataDir and logFile kept: the agent must share them with the fallback).
    const objects = parseManifest(renderDaemonSet(readFileSync(DAEMONSET_FILE, 'utf8'), AGENT_IMAGE));
    const daemonSet = objects.find((o) => o.kind === 'DaemonSet') as unknown as {
      spec: { template: { spec: PodSpec } };
    };
    const configMap = objects.find((o) => o.kind === 'ConfigMap') as unknown as {
      metadata: { name: string };
      data: Record<string, string>;
    };
    spec = daemonSet.spec.template.spec;
    const config: Record<string, unknown> = {
      ...(JSON.parse(configMap.data['config.json']!) as Record<string, unknown>),
      tableName: fixture.tableName,
      imdsEndpoint: fixture.imds.endpoint,
      dynamoEndpoint: fixture.iam.endpoint,
      // Released leases stay in COOLDOWN for the whole suite: a lease claimed twice would show.
      reuseWaitMs: 600_000,
    };
    dataDir = config['dataDir'] as string;
    const logDir = join(work, 'logs');
    mkdirSync(logDir);
    podOptions = {
      name: 'vpc-lease-cni-agent',
      namespace: 'kube-system',
      logDir: join(logDir, 'agent-pod'),
      configMaps: {
        [configMap.metadata.name]: {
          ...configMap.data,
          'config.json': JSON.stringify(config),
          'service-cidrs': SERVICE_CIDRS,
        },
      },
      // The test's only additions: test mode (the fixture's IMDS, macvlan for the ipvlan this kernel lacks), and
      // the metrics port picked by the kernel (61680 may be taken by another agent on this machine).
      extraEnv: { ...pluginEnv, VPC_LEASE_METRICS_ADDRESS: '127.0.0.1:0' },
    };
    agentPod = await CriPod.run(runtime, spec, podOptions);
    await until('NetworkReady after install', async () => ((await runtime.networkReady()).status ? true : undefined));
    phase('install (init container)');
    metricsUrl = await startAgent(agentPod);
    phase('agent serving');
  }, 600_000);

  afterAll(async () => {
    if (Object.keys(polls).length > 0)
      process.stderr.write(`agent-cri polls while waiting: ${JSON.stringify(polls)}\n`);
    process.stderr.write(`agent-cri setup ms: ${JSON.stringify(setupMs)}\n`);
    await agentPod?.remove();
    await runtime?.close();
    await fixture?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  }, 120_000);

  /** The node's leases, read from the store with control-plane keys. */
  const leases = (): Promise<Lease[]> => fixture.store.listLeases(fixture.arn);

  /** `crictl runp` of a plain pod (pod network): the runtime's CNI ADD through the installed shim. */
  async function runPod(name: string): Promise<{ name: string; id?: string; error?: string }> {
    const file = join(work, `pod-${podCounter++}.json`);
    writeFileSync(
      file,
      JSON.stringify({
        metadata: { name, namespace: 'team-a', uid: `uid-${name}`, attempt: 0 },
        log_directory: join(work, 'logs', name),
        linux: {},
      }),
    );
    const r = await runtime.crictl(['runp', file]);
    return r.code === 0 ? { name, id: r.stdout.trim() } : { name, error: r.stderr };
  }

  /** The pod's addresses on eth0, read inside its netns (the sandbox process's). */
  async function podAddresses(id: string): Promise<string[]> {
    const info = JSON.parse((await runtime.crictl(['inspectp', '-o', 'json', id])).stdout) as {
      info: { pid: number };
    };
    const out = execFileSync('nsenter', [`--net=/proc/${info.info.pid}/ns/net`, 'ip', '-j', '-4', 'addr', 'show'], {
      encoding: 'utf8',
    });
    return (JSON.parse(out) as { ifname: string; addr_info: { local: string }[] }[])
      .filter((l) => l.ifname === 'eth0')
      .flatMap((l) => l.addr_info.map((a) => a.local));
  }

  it('runp: ADD goes shim → agent (its ADD counter rises, no fallback), the pod has its lease; stopp: DEL releases', async () => {
    const before = await settledCounts('web-0: before');
    const pod = await runPod('web-0');
    expect(pod.error).toBeUndefined();
    const id = pod.id!;
    const [held, ...more] = (await leases()).filter((l) => l.state === 'CLAIMED' && l.holder?.containerId === id);
    expect(more).toEqual([]);
    expect(held?.holder).toMatchObject({ containerId: id, ifName: 'eth0', podNamespace: 'team-a', podName: 'web-0' });
    expect((await runtime.inspectPod(id)).status.network?.ip).toBe(held!.ip);
    expect(await podAddresses(id)).toEqual([held!.ip]);
    const added = await settledCounts('web-0: added');
    expect(added.agentAdds).toBe(before.agentAdds + 1);
    expect(added.fallbackAdds).toBe(before.fallbackAdds);

    // stopp tears the network down (DEL); rmp may ask again (DEL is idempotent): through the agent each time.
    await runtime.removePod(id);
    expect((await fixture.store.getLease(fixture.arn, held!.ip))?.state).toBe('COOLDOWN');
    const deleted = await settledCounts('web-0: deleted');
    expect(deleted.agentDels).toBeGreaterThan(added.agentDels);
    expect(deleted.fallbackDels).toBe(before.fallbackDels);
    // The plugin log at the ConfigMap's path, written by the agent through its mount of the host's directory.
    const log = await nodeFile('/var/log/vpc-lease/cni.log');
    expect(log).toContain(`"containerId":"${id}"`);
  }, 120_000);

  /** The CNI code of the failed ADD of a sandbox whose runp failed (containerd names the sandbox in its error). */
  async function failedAddCode(error: string): Promise<number | undefined> {
    const sandbox = /sandbox \\?"?([0-9a-f]{64})/.exec(error)?.[1];
    if (!sandbox) return undefined;
    const lines = (await nodeFile('/var/log/vpc-lease/cni.log')).split('\n').filter((l) => l.includes(sandbox));
    const failed = lines
      .map((l) => JSON.parse(l) as { msg: string; code?: number })
      .find((r) => r.msg === 'ADD failed');
    return failed?.code;
  }

  /** The pods of a wave, each retried once on a retryable failure as kubelet would (retries counted). */
  async function startAll(names: readonly string[], retried: string[]): Promise<Map<string, string>> {
    const ids = new Map<string, string>();
    await Promise.all(
      names.map(async (name) => {
        let run = await runPod(name);
        if (run.error !== undefined) {
          // CNI code 11 (try again later) is what the runtime retries; anything else is a failure.
          expect(await failedAddCode(run.error), run.error).toBe(11);
          retried.push(name);
          run = await runPod(name);
        }
        expect(run.error).toBeUndefined();
        ids.set(name, run.id!);
      }),
    );
    return ids;
  }

  /** What the plugin log says about the ADDs of `ids`: who ran each success (the agent is pid 1 in its container). */
  async function addsBy(ids: Iterable<string>): Promise<{ agent: number; fallback: number }> {
    const wanted = new Set(ids);
    const lines = (await nodeFile('/var/log/vpc-lease/cni.log'))
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l) as { msg?: string; containerId?: string; pid?: number })
      .filter((r) => r.msg === 'added' && wanted.has(r.containerId ?? ''));
    return {
      agent: lines.filter((r) => r.pid === AGENT_PID).length,
      fallback: lines.filter((r) => r.pid !== AGENT_PID).length,
    };
  }

  /** One lease per pod, held by its sandbox, the one it reports and has on eth0: no duplicate, none lost. */
  async function expectOneLeaseEach(ids: Map<string, string>): Promise<Lease[]> {
    const names = [...ids.keys()];
    const claimed = (await leases()).filter((l) => l.state === 'CLAIMED' && names.includes(l.holder?.podName ?? ''));
    expect(claimed.map((l) => l.holder?.podName).sort()).toEqual([...names].sort());
    for (const [name, id] of ids) {
      const [held, ...more] = claimed.filter((l) => l.holder?.containerId === id);
      expect(more, name).toEqual([]);
      expect(held?.holder?.podName).toBe(name);
      expect((await runtime.inspectPod(id)).status.network?.ip).toBe(held!.ip);
      expect(await podAddresses(id)).toEqual([held!.ip]);
    }
    expect(new Set(claimed.map((l) => l.ip)).size).toBe(names.length);
    return claimed;
  }

  /** Removes the pods; everything the test claimed must be back in COOLDOWN: nothing leaked, nothing freed twice. */
  async function expectNoLeak(ids: Map<string, string>, before: Map<string, string>, claimed: Lease[]): Promise<void> {
    for (const id of ids.values()) await runtime.removePod(id);
    const touched = (await leases()).filter((l) => before.get(l.ip) === 'FREE' && l.state !== 'FREE');
    expect(touched.filter((l) => l.state !== 'COOLDOWN')).toEqual([]);
    expect(touched.map((l) => l.ip).sort()).toEqual(claimed.map((l) => l.ip).sort());
  }

  const node: WaveNode = {
    settledCounts,
    leases,
    startAll,
    restartAgent: async () => {
      metricsUrl = await startAgent(agentPod);
    },
    expectOneLeaseEach,
    addsBy,
    expectNoLeak,
  };

  it('the agent killed mid-ADD (SIGKILL after its claim; a crash): the fallback finishes it on the same lease, no duplicate, no leak', async () => {
    let hung: Lease | undefined;
    const prepare = async () => {
      // A new agent container that blocks right after its first claim: that ADD is in the agent when it dies.
      await agentPod.stop('agent', 0);
      await startAgent(agentPod, { VPC_LEASE_TEST_HANG_AT: 'claim' });
    };
    const interrupt = async (wave: readonly string[]) => {
      hung = await until('kill: the agent holds a claim', async () =>
        (await leases()).find((l) => l.state === 'CLAIMED' && wave.includes(l.holder?.podName ?? '')),
      );
      await agentPod.stop('agent', 0);
      return new Map<string, string>();
    };
    await interruptedWave(node, 'kill', { prepare, interrupt }, async ({ wave, later, claimed, now, ran }) => {
      // The ADD the agent died in kept its lease: the fallback found it by holder instead of claiming another.
      expect(claimed.find((l) => l.holder?.podName === hung!.holder?.podName)?.ip).toBe(hung!.ip);
      // The wave ran in fallback (the hung agent accepted nothing more); the new agent served the later pods.
      expect(ran).toEqual({ agent: later.length, fallback: wave.length });
      expect(now.fallbackAdds).toBe(wave.length);
      expect(now.agentAdds).toBe(later.length);
    });
  }, 180_000);

  it("a rolling update (SIGTERM, the manifest's grace period) while pods start: each ADD succeeds or is retryable, none in the gap is lost", async () => {
    const gap = ['term-gap-0'];
    const interrupt = async (wave: readonly string[], retried: string[]) => {
      await until('term: first claim of the wave', async () =>
        (await leases()).some((l) => l.state === 'CLAIMED' && wave.includes(l.holder?.podName ?? ''))
          ? true
          : undefined,
      );
      await agentPod.stop('agent');
      // The gap between the old agent's exit and the new one's start: the shims run the plugin.
      return startAll(gap, retried);
    };
    await interruptedWave(node, 'term', { interrupt }, async ({ later, gapIds, ids, now, ran }) => {
      expect(ran.agent + ran.fallback).toBe(ids.size);
      expect((await addsBy(gapIds.values())).fallback).toBe(gap.length);
      expect((await addsBy(later.map((n) => ids.get(n)!))).agent).toBe(later.length);
      // Every ADD the old agent did not run was counted by the new one, from the fallback records.
      expect(now.fallbackAdds).toBe(ran.fallback);
    });
  }, 180_000);

  it('control: the same agent without HostToContainer on the netns mounts cannot enter a new pod netns, and the ADD fails', async () => {
    const control = structuredClone(spec) as { -readonly [K in keyof PodSpec]: PodSpec[K] };
    delete control.initContainers;
    const agent = control.containers.find((c) => c.name === 'agent')!;
    const netnsMounts = (agent.volumeMounts ?? []).filter((m) => /netns/.test(m.mountPath));
    expect(netnsMounts.map((m) => m.mountPropagation)).toEqual(['HostToContainer', 'HostToContainer']);
    for (const m of netnsMounts) delete m.mountPropagation;
    const before = new Map((await leases()).map((l) => [l.ip, l.state as string]));
    await agentPod.stop('agent', 0);
    const controlPod = await CriPod.run(runtime, control, {
      ...podOptions,
      name: 'vpc-lease-cni-agent-control',
      logDir: join(work, 'logs', 'control-pod'),
    });
    try {
      const url = await startAgent(controlPod);
      const pod = await runPod('control-0');
      // The agent answered (no fallback: the shim relays its error), and it names the netns it could not use.
      expect(pod.error).toMatch(/invalid CNI_NETNS: \/var\/run\/netns\/cni-\S+ is not a network namespace/);
      const text = await (await fetch(url)).text();
      expect(sample(text, 'vpc_lease_cni_requests_total', { command: 'ADD', result: 'error' })).toBe(1);
      expect(sample(text, 'vpc_lease_cni_request_duration_seconds_count', { command: 'ADD', path: 'agent' })).toBe(1);
      // Nothing kept: the failed ADD released what it claimed.
      const after = await leases();
      expect(after.filter((l) => l.state === 'CLAIMED' && before.get(l.ip) === 'FREE')).toEqual([]);
    } finally {
      await controlPod.stop('agent', 0);
      await controlPod.remove();
      metricsUrl = await startAgent(agentPod);
    }
  }, 120_000);
});
