import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import type { Lease } from '../../shared/domain/lease.js';
import { LightDynamoClient } from '../../shared/dynamo/light-client.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import { missing } from '../support/capabilities.js';
import {
  agentSubject,
  type ChurnSubject,
  goSubject,
  pluginSubject,
  runTurns,
  type SubjectStats,
  subjectFigures,
} from './churn-subjects.js';
import { CniBenchNode } from './cni-node.js';
import { countDuplicates, type Holding } from './holdings.js';
import { startRequestCounter } from './request-counter.js';
import { elapsedMs, percentile, ratio, round } from './stats.js';

export interface ChurnBenchOptions {
  readonly loops: number;
  readonly seconds: number;
  /** Leases on the node: a few more than loops, so claims contend for the same candidates. */
  readonly leases: number;
  /** A dist/ directory of another build (its vpc-lease-cni and shim): its agent runs beside this build's. */
  readonly baselineDir?: string;
  readonly seed?: number;
}

/** Turns per subject: the subjects alternate, so a change in load hits each of them alike. */
const TURNS = 4;

/**
 * `churn`: `loops` kubelet-like workers on one node, each ADD → DEL → ADD … with the real processes in their own
 * pod netns, for `seconds` per subject: through this build's agent (the runtime's path since #22; the top-level
 * figures), through a baseline build's agent (`--baseline DIR`), the per-call plugin, and the Go reference chain,
 * in alternating turns. ADD and DEL reach dynalite through two different counting proxies, so requests per command
 * are exact even while they interleave. Then the same loops on the lease store alone, in-process, which is the
 * store's ceiling without process start-up.
 */
export async function runChurnBench(options: ChurnBenchOptions): Promise<Record<string, unknown>> {
  const skip = missing('root', 'netns', 'go-plugins');
  if (skip) return { skipped: skip };
  const node = await CniBenchNode.start();
  const delCounter = await startRequestCounter(node.fixture.dynalite.endpoint);
  const subjects: ChurnSubject[] = [];
  try {
    await node.fixture.seed(options.leases);
    const confs = { add: node.netconf(true), del: node.netconf(false, { dynamoEndpoint: delCounter.endpoint }) };
    const agent = await agentSubject('agent', node, node.binary, confs);
    subjects.push(agent);
    if (options.baselineDir)
      subjects.push(await agentSubject('baselineAgent', node, join(options.baselineDir, 'vpc-lease-cni'), confs));
    subjects.push(pluginSubject(node, confs), goSubject(node));
    const netnses = Array.from({ length: options.loops }, () => node.fixture.addNetns());
    // Warm the identity and code caches once per subject, as on a node that already runs pods.
    for (const subject of subjects) {
      await subject.run('ADD', { netns: netnses[0]!, containerId: `warm-${subject.name}` });
      await subject.run('DEL', { netns: netnses[0]!, containerId: `warm-${subject.name}` });
    }
    node.dynamoCounter.reset();
    delCounter.reset();
    node.ec2Trap.reset();
    const viaBefore = await Promise.all(subjects.map((s) => s.viaAgent()));

    const turnSeconds = options.seconds / TURNS;
    const sampling = sampleClaims(
      () => node.fixture.store.listLeases(node.fixture.arn),
      performance.now() + subjects.length * options.seconds * 1000,
    );
    const stats = await runTurns(subjects, netnses, { turns: TURNS, turnSeconds, seed: options.seed ?? 1 });
    const claims = await sampling.stop();
    const viaAfter = await Promise.all(subjects.map((s) => s.viaAgent()));
    const lostBeforeDelRetries = lostOf(options.leases, await node.fixture.store.listLeases(node.fixture.arn));
    const delRetries = await retryFailedDels(subjects, stats);

    const ours = subjects.filter((s) => s.leases).map((s) => stats.get(s.name)!);
    const holdings = ours.flatMap((s) => s.holdings);
    const duplicates = countDuplicates(holdings);
    const ipOf = new Map(holdings.map((h) => [h.pod, h.ip]));
    // A holder the store showed on another address than its ADD returned: two holders on one lease, seen in the store.
    const holderOnAnotherAddress = [...claims.ipsByHolder].filter(([pod, ips]) =>
      [...ips].some((ip) => ipOf.has(pod) && ipOf.get(pod) !== ip),
    ).length;
    const leasesAtEnd = await node.fixture.store.listLeases(node.fixture.arn);
    const leftClaimed = leasesAtEnd.filter((l) => l.state === 'CLAIMED');
    const lostLeases = lostOf(options.leases, leasesAtEnd);
    const cores = availableParallelism();
    const figures = Object.fromEntries(
      subjects.map((s, i) => {
        const st = stats.get(s.name)!;
        const before = viaBefore[i];
        const after = viaAfter[i];
        const calls = st.addMs.length + st.delMs.length;
        const profile = s.profile(st.addMs, st.delMs);
        return [
          s.name,
          {
            ...subjectFigures(st, cores),
            // Calls the agent did not serve itself: the shim ran the full plugin (the agent's own metrics count).
            ...(before !== undefined && after !== undefined ? { fallbacks: calls - (after - before) } : {}),
            ...(profile
              ? {
                  agentAddPhasesMs: profile['add'],
                  agentDelPhasesMs: profile['del'],
                  agentBiggestRemainingCost: profile['biggest'],
                }
              : {}),
          },
        ];
      }),
    ) as Record<string, Record<string, number>>;
    const main = figures['agent']!;
    const agentStats = stats.get('agent')!;
    const store = await storeOnlyChurn(node, options);
    const versus = (name: string) =>
      figures[name]
        ? {
            podsPerSecond: ratio(main['podsPerSecond']!, figures[name]['podsPerSecond']!),
            addP50Ms: ratio(main['addP50Ms']!, figures[name]['addP50Ms']!),
            delP50Ms: ratio(main['delP50Ms']!, figures[name]['delP50Ms']!),
            cpuMsPerPod: ratio(main['cpuMsPerPod']!, figures[name]['cpuMsPerPod']!),
          }
        : undefined;
    const failures = ours.flatMap((s) => s.failures);
    return {
      loops: options.loops,
      secondsPerSubject: options.seconds,
      turns: TURNS,
      leases: options.leases,
      path: 'shim → agent',
      ...main,
      subjects: figures,
      /** This build's agent over each other subject, measured in the same run (pods/s: higher is better). */
      agentRatioTo: {
        ...(figures['baselineAgent'] ? { baselineAgent: versus('baselineAgent') } : {}),
        plugin: versus('plugin'),
        goChain: versus('goChain'),
      },
      adds: agentStats.addMs.length,
      failures: failures.length,
      firstFailure: failures[0],
      /** Pairs of pods whose sure holds of one address overlapped (each loop has its own netns: an address in two). */
      duplicates,
      /** Store samples during the run: a holder with two CLAIMED leases, or on another address than its ADD got. */
      storeSamples: claims.samples,
      holdersWithTwoClaims: claims.holdersWithTwoClaims,
      holderOnAnotherAddress,
      claimedLeftAfterAllDels: leftClaimed.length,
      /** Lost before the failed DELs were retried (as a kubelet retries them): those a failed DEL left CLAIMED. */
      lostBeforeDelRetries,
      delRetries,
      lostLeases,
      /** Why each lease still CLAIMED is (claimedBecause). */
      claimedAtEndBecause: claimedBecause(leftClaimed, ours),
      /** What the lost ones are: leases missing from the store, and the states of those there. */
      leasesAtEnd: {
        missing: options.leases - leasesAtEnd.length,
        ...Object.fromEntries(
          [...new Set(leasesAtEnd.map((l) => l.state))].map((state) => [
            state,
            leasesAtEnd.filter((l) => l.state === state).length,
          ]),
        ),
      },
      fallbacks: subjects.reduce(
        (sum, s) => sum + ((figures[s.name] as { fallbacks?: number } | undefined)?.fallbacks ?? 0),
        0,
      ),
      dynamoRequestsPerAdd: round(node.dynamoCounter.total() / Math.max(1, ours.flatMap((s) => s.addMs).length)),
      dynamoRequestsPerDel: round(delCounter.total() / Math.max(1, ours.flatMap((s) => s.delMs).length)),
      dynamoAddRequestsByOperation: Object.fromEntries(node.dynamoCounter.counts),
      ec2RequestsPerPod: round(node.ec2Trap.total() / Math.max(1, ours.flatMap((s) => s.addMs).length)),
      storeOnly: store,
      targets: {
        atLeast50PodsPerSecond: main['podsPerSecond']! >= 50,
        noDuplicates: duplicates === 0 && claims.holdersWithTwoClaims === 0 && holderOnAnotherAddress === 0,
        noLostLeases: lostLeases === 0,
      },
    };
  } finally {
    await Promise.allSettled(subjects.map((s) => s.close()));
    await delCounter.close();
    await node.close();
  }
}

/** Every pod is deleted by now, so a lease is lost when it is missing or anything but FREE or COOLDOWN. */
function lostOf(leases: number, atEnd: readonly Lease[]): number {
  return leases - atEnd.length + atEnd.filter((l) => l.state !== 'FREE' && l.state !== 'COOLDOWN').length;
}

/** A kubelet's DEL retries, bounded: enough for a store that timed out under load to answer. */
const DEL_RETRIES = 5;

/**
 * Retries each failed DEL of our subjects as the kubelet does (it calls DEL again until it succeeds): a DEL that
 * timed out on the store leaves its lease CLAIMED, which is not lost on a node. Counted, never silent.
 */
async function retryFailedDels(
  subjects: readonly ChurnSubject[],
  stats: ReadonlyMap<string, SubjectStats>,
): Promise<{ pods: number; calls: number; stillFailing: number }> {
  const out = { pods: 0, calls: 0, stillFailing: 0 };
  for (const subject of subjects.filter((s) => s.leases)) {
    const st = stats.get(subject.name)!;
    for (const pod of st.failedDels) {
      out.pods++;
      let ok = false;
      for (let i = 0; i < DEL_RETRIES && !ok; i++) {
        out.calls++;
        ok = (await subject.run('DEL', pod)).code === 0;
      }
      if (ok) st.delSucceeded.add(pod.containerId);
      else out.stillFailing++;
    }
  }
  return out;
}

/**
 * Sorts the leases still CLAIMED after every DEL: `delNeverSucceeded` (the retries failed too);
 * `lateClaimOfFailedAdd` (the pod's ADD failed — a store timeout — and its DEL succeeded: the claim the ADD gave up
 * on was still queued in the store and landed after DEL had looked for it; on a node, GC or the reconciler takes it
 * back); `unexplained` (an ADD and a DEL that both succeeded and left the lease CLAIMED: a bug).
 */
function claimedBecause(leases: readonly Lease[], ours: readonly SubjectStats[]): Record<string, number> {
  const out = { delNeverSucceeded: 0, lateClaimOfFailedAdd: 0, unexplained: 0 };
  for (const lease of leases) {
    const pod = lease.holder?.containerId ?? '';
    if (!ours.some((s) => s.delSucceeded.has(pod))) out.delNeverSucceeded++;
    else if (ours.some((s) => s.failedAdds.has(pod))) out.lateClaimOfFailedAdd++;
    else out.unexplained++;
  }
  return out;
}

interface ClaimSamples {
  samples: number;
  holdersWithTwoClaims: number;
  ipsByHolder: Map<string, Set<string>>;
}

/**
 * Reads the node's leases over and over until `stop()` (or `deadlineMs`, performance.now(), as a bound), recording
 * which addresses each holder was seen CLAIMED on and how often one holder held two at once.
 */
function sampleClaims(list: () => Promise<readonly Lease[]>, deadlineMs: number): { stop(): Promise<ClaimSamples> } {
  const out: ClaimSamples = { samples: 0, holdersWithTwoClaims: 0, ipsByHolder: new Map() };
  let stopped = false;
  let wake: (() => void) | undefined;
  const running = (async () => {
    while (!stopped && performance.now() < deadlineMs) {
      const perHolder = new Map<string, number>();
      for (const lease of await list()) {
        if (lease.state !== 'CLAIMED' || !lease.holder) continue;
        const pod = lease.holder.containerId;
        perHolder.set(pod, (perHolder.get(pod) ?? 0) + 1);
        out.ipsByHolder.set(pod, (out.ipsByHolder.get(pod) ?? new Set()).add(lease.ip));
      }
      out.holdersWithTwoClaims += [...perHolder.values()].filter((n) => n > 1).length;
      out.samples += 1;
      // A few reads a second: enough to catch a double claim that lasts, without loading dynalite under the pods.
      await new Promise<void>((resolve) => {
        wake = resolve;
        setTimeout(resolve, 100);
      });
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      wake?.();
      await running;
      return out;
    },
  };
}

/** The same loops on DynamoLeaseStore over the CNI's light client, in this process: claim, then release by ip. */
async function storeOnlyChurn(node: CniBenchNode, options: ChurnBenchOptions): Promise<Record<string, unknown>> {
  const api = new LightDynamoClient({
    endpoint: node.fixture.dynalite.endpoint,
    region: 'us-east-1',
    credentials: async () => ({ accessKeyId: 'test', secretAccessKey: 'test' }),
  });
  const store = new DynamoLeaseStore({ api, tableName: node.fixture.tableName });
  const arn = node.fixture.arn;
  const seconds = Math.min(options.seconds, 5);
  const deadline = performance.now() + seconds * 1000;
  const claimMs: number[] = [];
  const holdings: Holding[] = [];
  const failures = new Map<string, number>();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: options.loops }, async (_, index) => {
      for (let i = 0; performance.now() < deadline; i++) {
        const holder = { containerId: `store-${index}-${i}`, ifName: 'eth0', netns: `/var/run/netns/s${index}` };
        const start = process.hrtime.bigint();
        try {
          const lease = await store.claim(arn, holder, Date.now(), { checkExisting: false });
          claimMs.push(elapsedMs(start));
          const from = performance.now();
          // Hold across a turn of the event loop so other workers' claims interleave with this hold.
          await new Promise((resolve) => setImmediate(resolve));
          const until = performance.now();
          await store.release(arn, holder, Date.now(), 0, lease.ip);
          holdings.push({ ip: lease.ip, pod: holder.containerId, fromMs: from, untilMs: until });
        } catch (err) {
          failures.set((err as Error).name, (failures.get((err as Error).name) ?? 0) + 1);
        }
      }
    }),
  );
  const elapsedS = (performance.now() - t0) / 1000;
  return {
    seconds: round(elapsedS),
    podsPerSecond: round(holdings.length / elapsedS),
    claimP50Ms: round(percentile(claimMs, 50)),
    claimP99Ms: round(percentile(claimMs, 99)),
    failures: Object.fromEntries(failures),
    duplicates: countDuplicates(holdings),
  };
}
