import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { SEA_NATIVE_FILES } from '../../node/launcher/layout.js';
import type { PluginRun } from '../node/support/node-fixture.js';
import { missing } from '../support/capabilities.js';
import { AgentBench } from './cni-agent.js';
import { type BenchFamily, FamilyBench } from './cni-families.js';
import { CniBenchNode, expectOk } from './cni-node.js';
import { childrenCpuMs } from './cpu.js';
import { execPlugin } from './exec.js';
import { phaseMediansMs } from './plugin-log.js';
import { elapsedMs, type LatencySummary, ratio, round, seededRandom, shuffle, summarize } from './stats.js';

export interface CniBenchOptions {
  /** Timed rounds; each round runs every subject once, in a seeded random order. */
  readonly rounds: number;
  /** Pods run through the counting proxy to count DynamoDB requests per command. */
  readonly countedPods: number;
  readonly seed: number;
  /** Families measured beside ipv4, each on a node of its own. Default dual and ipv6. */
  readonly families?: readonly BenchFamily[];
}

/** Pods per family (dual, ipv6) in the CPU and the counted passes. */
const FAMILY_CPU_PODS = 5;
const FAMILY_COUNTED_PODS = 3;

type Subject = 'bareNode' | 'version' | 'add' | 'check' | 'del' | 'goVersion' | 'goAdd' | 'goCheck' | 'goDel';

/** Peak resident set of one run, in KiB, from GNU time's wait4 rusage (undefined without /usr/bin/time). */
async function peakRssKib(file: string, env: Record<string, string>, stdin: string): Promise<number | undefined> {
  const dir = mkdtempSync(join(tmpdir(), 'vpc-lease-rss-'));
  try {
    const out = join(dir, 'rss');
    const run = await execPlugin('/usr/bin/time', ['-f', '%M', '-o', out, file], env, stdin);
    if (run.code !== 0) return undefined;
    return Number(readFileSync(out, 'utf8').trim().split('\n').at(-1));
  } catch {
    return undefined;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function timed(what: string, run: () => Promise<PluginRun>): Promise<{ ms: number; run: PluginRun }> {
  const start = process.hrtime.bigint();
  const result = await run();
  const ms = elapsedMs(start);
  expectOk(what, result);
  return { ms, run: result };
}

/**
 * `cni`: ADD, CHECK, DEL and VERSION of the built plugin, each a fresh process as kubelet runs it, against
 * local dynalite — interleaved round by round with bare `node -e ''` (the floor any Node binary pays) and the
 * Go reference chain (macvlan + host-local), so load on a shared machine hits all three alike and the ratios
 * stay meaningful. Request counts come from a separate counted pass through a proxy, so the timed runs do
 * not pay its extra hop.
 */
export async function runCniBench(options: CniBenchOptions): Promise<Record<string, unknown>> {
  const skip = missing('root', 'netns', 'go-plugins');
  if (skip) return { skipped: skip };
  const node = await CniBenchNode.start();
  let agentBench: AgentBench | undefined;
  let familyBench: FamilyBench | undefined;
  try {
    // Addresses high in the fixture subnet: other suites on this host seed from .10 and route them in its table.
    await node.fixture.seed(16, 160);
    const netns = node.fixture.addNetns();
    const env = { PATH: process.env['PATH'] ?? '/usr/bin:/bin' };
    const ours = node.netconf(false);
    const samples: Record<Subject, number[]> = {
      bareNode: [],
      version: [],
      add: [],
      check: [],
      del: [],
      goVersion: [],
      goAdd: [],
      goCheck: [],
      goDel: [],
    };

    // A node that has run pods before: identity cached on disk, binaries in the page cache, V8 code cache written.
    for (let i = 0; i < 2; i++) {
      expectOk('warm-up ADD', await node.run('ADD', { netns, containerId: `warm${i}` }, ours));
      expectOk('warm-up DEL', await node.run('DEL', { netns, containerId: `warm${i}` }, ours));
    }

    // The shim's two paths (through the resident agent, and the fallback with no agent) in the same rounds.
    agentBench = await AgentBench.start(node);
    const agentBlocks = agentBench.blocks(netns, ours);
    for (const block of Object.values(agentBlocks)) await block(-1);
    agentBench.resetSamples();
    familyBench = await FamilyBench.start(node, agentBench, options.families ?? ['dual', 'ipv6']);
    const familyBlocks = familyBench.blocks(netns);
    for (const block of Object.values(familyBlocks)) await block(-1);
    familyBench.resetSamples();
    const blocks: Record<string, (i: number) => Promise<void>> = {
      ...agentBlocks,
      ...familyBlocks,
      bareNode: async () => {
        samples.bareNode.push((await timed('node -e', () => execPlugin(process.execPath, ['-e', ''], env, ''))).ms);
      },
      version: async () => {
        samples.version.push((await timed('VERSION', () => node.run('VERSION', {}, { cniVersion: '1.0.0' }))).ms);
      },
      goVersion: async () => {
        const run = () => node.runGo('VERSION', { containerId: 'v', ifName: 'eth1' }, { cniVersion: '1.0.0' });
        samples.goVersion.push((await timed('go VERSION', run)).ms);
      },
      pod: async (i) => {
        const containerId = `bench${i}`;
        const add = await timed('ADD', () => node.run('ADD', { netns, containerId }, ours));
        samples.add.push(add.ms);
        const withPrev = { ...ours, prevResult: add.run.json };
        samples.check.push((await timed('CHECK', () => node.run('CHECK', { netns, containerId }, withPrev))).ms);
        samples.del.push((await timed('DEL', () => node.run('DEL', { netns, containerId }, ours))).ms);
      },
      goPod: async (i) => {
        const ids = { containerId: `go${i}`, netns, ifName: 'eth1' };
        const add = await timed('go ADD', () => node.runGo('ADD', ids, node.goNetconf()));
        samples.goAdd.push(add.ms);
        const withPrev = node.goNetconf({ prevResult: add.run.json });
        samples.goCheck.push((await timed('go CHECK', () => node.runGo('CHECK', ids, withPrev))).ms);
        samples.goDel.push((await timed('go DEL', () => node.runGo('DEL', ids, node.goNetconf()))).ms);
      },
    };
    const random = seededRandom(options.seed);
    for (let i = 0; i < options.rounds; i++) {
      for (const name of shuffle(Object.keys(blocks), random)) await blocks[name]!(i);
    }

    // The plugin's own phase marks from the timed runs (milliseconds since its process started).
    const addPhasesMs = phaseMediansMs(node.fixture.logFile, 'added');
    const delPhasesMs = phaseMediansMs(node.fixture.logFile, 'deleted');

    // Size on disk and peak RSS (max of 3 runs each), ours beside the Go reference plugins.
    const rss = async (runOnce: () => Promise<number | undefined>): Promise<number | undefined> => {
      const seen: number[] = [];
      for (let i = 0; i < 3; i++) {
        const kib = await runOnce();
        if (kib !== undefined) seen.push(kib);
      }
      return seen.length ? Math.max(...seen) : undefined;
    };
    const memConf = JSON.stringify(ours);
    const goConf = JSON.stringify(node.goNetconf());
    let memRound = 0;
    const memory = {
      ourBytes: statSync(node.binary).size,
      ourNativeBytes: SEA_NATIVE_FILES.reduce((n, f) => n + statSync(join(dirname(node.binary), f)).size, 0),
      goMacvlanBytes: statSync('/usr/lib/cni/macvlan').size,
      goHostLocalBytes: statSync('/usr/lib/cni/host-local').size,
      peakRssKib: {
        version: await rss(() => peakRssKib(node.binary, node.env('VERSION', {}), '{"cniVersion":"1.0.0"}')),
        add: await rss(async () => {
          const containerId = `mem${memRound++}`;
          const kib = await peakRssKib(node.binary, node.env('ADD', { netns, containerId }), memConf);
          expectOk('mem DEL', await node.run('DEL', { netns, containerId }, ours));
          return kib;
        }),
        del: await rss(async () => {
          const containerId = `mem${memRound++}`;
          expectOk('mem ADD', await node.run('ADD', { netns, containerId }, ours));
          return peakRssKib(node.binary, node.env('DEL', { netns, containerId }), memConf);
        }),
        bareNode: await rss(() => peakRssKib(process.execPath, { PATH: env.PATH }, '')),
        goMacvlanAdd: await rss(async () => {
          const ids = { containerId: `gomem${memRound++}`, netns, ifName: 'eth1' };
          const kib = await peakRssKib('/usr/lib/cni/macvlan', node.goEnv('ADD', ids), goConf);
          expectOk('go mem DEL', await node.runGo('DEL', ids, node.goNetconf()));
          return kib;
        }),
        goMacvlanDel: await rss(async () => {
          const ids = { containerId: `gomem${memRound++}`, netns, ifName: 'eth1' };
          expectOk('go mem ADD', await node.runGo('ADD', ids, node.goNetconf()));
          return peakRssKib('/usr/lib/cni/macvlan', node.goEnv('DEL', ids), goConf);
        }),
      },
    };

    // CPU per pod (ADD + DEL), from the reaped children's rusage, beside two bare `node -e ''` (the floor of
    // any pod served by two Node processes) and the Go chain's ADD + DEL.
    const cpuPods = 10;
    const cpuOf = async (run: (i: number) => Promise<void>): Promise<number> => {
      const before = childrenCpuMs();
      for (let i = 0; i < cpuPods; i++) await run(i);
      return round((childrenCpuMs() - before) / cpuPods);
    };
    const cpuMsPerPod = {
      ours: await cpuOf(async (i) => {
        expectOk('cpu ADD', await node.run('ADD', { netns, containerId: `cpu${i}` }, ours));
        expectOk('cpu DEL', await node.run('DEL', { netns, containerId: `cpu${i}` }, ours));
      }),
      twoBareNodes: await cpuOf(async () => {
        for (let k = 0; k < 2; k++) expectOk('node -e', await execPlugin(process.execPath, ['-e', ''], env, ''));
      }),
      goChain: await cpuOf(async (i) => {
        const ids = { containerId: `gocpu${i}`, netns, ifName: 'eth1' };
        expectOk('go cpu ADD', await node.runGo('ADD', ids, node.goNetconf()));
        expectOk('go cpu DEL', await node.runGo('DEL', ids, node.goNetconf()));
      }),
    };

    const agentCpu = await agentBench.cpuMsPerPod(netns, ours, cpuPods);
    const shimPaths: Record<string, unknown> = {
      ...agentBench.figures(),
      podMarksP50Ms: await agentBench.podMarksMs(netns),
    };
    const agentLatency = shimPaths['latencyMs'] as Record<string, LatencySummary>;
    const ipFamilies = {
      ipv4: {
        latencyMs: {
          add: summarize(samples.add),
          del: summarize(samples.del),
          agentAdd: agentLatency['agentAdd'],
          agentDel: agentLatency['agentDel'],
        },
        cpuMsPerPod: { ours: cpuMsPerPod.ours, throughAgent: agentCpu.agent, fallback: agentCpu.fallback },
      },
      // Fewer pods than ipv4's: each family's passes are a process per call on a machine the other rows share.
      ...(await familyBench.figures(netns, FAMILY_CPU_PODS, FAMILY_COUNTED_PODS)),
    };

    // Counted pass: every request the plugin sends to DynamoDB, IMDS and (never) EC2, per command.
    const counted = node.netconf(true);
    const perCommand = { ADD: 0, CHECK: 0, DEL: 0 };
    const byOperation: Record<string, Record<string, number>> = { ADD: {}, CHECK: {}, DEL: {} };
    const imdsBefore = node.fixture.imds.requests.length;
    node.ec2Trap.reset();
    let lastAdd: Record<string, unknown> | undefined;
    for (let i = 0; i < options.countedPods; i++) {
      const containerId = `count${i}`;
      for (const command of ['ADD', 'CHECK', 'DEL'] as const) {
        node.dynamoCounter.reset();
        const conf = command === 'CHECK' ? { ...counted, prevResult: lastAdd } : counted;
        const run = expectOk(`counted ${command}`, await node.run(command, { netns, containerId }, conf));
        if (command === 'ADD') lastAdd = run.json;
        perCommand[command] += node.dynamoCounter.total();
        for (const [op, n] of node.dynamoCounter.counts)
          byOperation[command]![op] = (byOperation[command]![op] ?? 0) + n;
      }
    }
    const pods = options.countedPods;
    const per = (n: number): number => round(n / pods);
    const add = summarize(samples.add);
    const del = summarize(samples.del);
    const bare = summarize(samples.bareNode);
    const goAdd = summarize(samples.goAdd);
    const goDel = summarize(samples.goDel);
    const dynamoRequestsPerAdd = per(perCommand.ADD);
    const dynamoRequestsPerDel = per(perCommand.DEL);
    const ec2RequestsPerPod = per(node.ec2Trap.total());
    const addP50RatioToBareNode = ratio(add.p50Ms, bare.p50Ms);
    const delP50RatioToBareNode = ratio(del.p50Ms, bare.p50Ms);
    return {
      rounds: options.rounds,
      seed: options.seed,
      latencyMs: {
        add,
        check: summarize(samples.check),
        del,
        version: summarize(samples.version),
        bareNode: bare,
        goAdd,
        goCheck: summarize(samples.goCheck),
        goDel,
        goVersion: summarize(samples.goVersion),
      },
      addP50RatioToBareNode,
      delP50RatioToBareNode,
      versionP50RatioToBareNode: ratio(summarize(samples.version).p50Ms, bare.p50Ms),
      addP50RatioToGoReference: ratio(add.p50Ms, goAdd.p50Ms),
      delP50RatioToGoReference: ratio(del.p50Ms, goDel.p50Ms),
      /** What the plugin adds on top of starting Node at all, the part its own code controls. */
      addP50OverBareNodeMs: round(add.p50Ms - bare.p50Ms),
      addPhasesSinceProcessStartMs: addPhasesMs,
      delPhasesSinceProcessStartMs: delPhasesMs,
      binary: 'single executable (V8 code cache)',
      memory,
      cpuMsPerPod: { ...cpuMsPerPod, throughAgent: agentCpu.agent, fallback: agentCpu.fallback },
      shimPaths,
      ipFamilies,
      countedPods: pods,
      dynamoRequestsPerAdd,
      dynamoRequestsPerCheck: per(perCommand.CHECK),
      dynamoRequestsPerDel,
      dynamoRequestsByOperation: byOperation,
      imdsRequestsPerPod: per(node.fixture.imds.requests.length - imdsBefore),
      ec2RequestsPerPod,
      targets: {
        addP50AtMost1_3xBareNode: addP50RatioToBareNode <= 1.3,
        delP50AtMost1_3xBareNode: delP50RatioToBareNode <= 1.3,
        atMost2DynamoRequestsPerAdd: dynamoRequestsPerAdd <= 2,
        atMost1DynamoRequestPerDel: dynamoRequestsPerDel <= 1,
        noEc2CallsPerPod: ec2RequestsPerPod === 0,
        cpuAtMost50MsPerPod: cpuMsPerPod.ours <= 50,
        agentAddP50AtMostGoAdd: agentLatency['agentAdd']!.p50Ms <= goAdd.p50Ms,
        agentDelP50AtMostGoDel: agentLatency['agentDel']!.p50Ms <= goDel.p50Ms,
        agentCpuPerPodAtMostGoChain: agentCpu.agent <= cpuMsPerPod.goChain,
        agentPeakRssAtMost80Mb: (shimPaths['agentPeakRssKib'] as number) <= 80 * 1024,
      },
    };
  } finally {
    await familyBench?.close();
    await agentBench?.close();
    await node.close();
  }
}
