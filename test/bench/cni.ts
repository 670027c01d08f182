import type { PluginRun } from '../node/support/node-fixture.js';
import { missing } from '../support/capabilities.js';
import { CniBenchNode, expectOk } from './cni-node.js';
import { execPlugin } from './exec.js';
import { phaseMediansMs } from './plugin-log.js';
import { elapsedMs, ratio, round, seededRandom, shuffle, summarize } from './stats.js';

export interface CniBenchOptions {
  /** Timed rounds; each round runs every subject once, in a seeded random order. */
  readonly rounds: number;
  /** Pods run through the counting proxy to count DynamoDB requests per command. */
  readonly countedPods: number;
  readonly seed: number;
}

type Subject = 'bareNode' | 'version' | 'add' | 'check' | 'del' | 'goVersion' | 'goAdd' | 'goCheck' | 'goDel';

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
  try {
    await node.fixture.seed(16);
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

    const blocks: Record<string, (i: number) => Promise<void>> = {
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
      },
    };
  } finally {
    await node.close();
  }
}
