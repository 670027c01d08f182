import { systemClock } from '../../shared/clock.js';
import { LightDynamoClient } from '../../shared/dynamo/light-client.js';
import { SdkEc2 } from '../../shared/ec2/sdk-ec2.js';
import { formatViolations } from '../../shared/invariants/checker.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import type { LifecycleDeps } from '../../shared/lifecycle/deps.js';
import { LAUNCH_DETAIL_TYPE } from '../../shared/lifecycle/events.js';
import { silentLogger } from '../../shared/log.js';
import { SdkReconcileEc2 } from '../../shared/reconcile/ec2.js';
import { reconcile } from '../../shared/reconcile/reconciler.js';
import { ControlPlaneCloud, instanceIdOf, TABLE, waitFor } from '../bench/control-plane-cloud.js';
import { seededRandom } from '../bench/stats.js';
import { CrashSwitch, crashable } from '../control-plane/support/crash.js';
import { FILL_POD_TAG, fillSubnet, seedFillSubnets } from './fill-subnets.js';
import { HooklessFleet } from './hookless-fleet.js';
import { runKubeletLoops } from './kubelet.js';
import { observerOf } from './observer.js';
import { fillOutcomeViolations, launchOutcomeViolations } from './outcomes.js';
import type { ChaosSchedule } from './schedule.js';
import { ChaosTrail, DEFAULT_TRAIL_DIR } from './trail.js';

/** Real ms per AWS ms: attach 3 s → 150 ms, boot 15 s → 750 ms, the 300 s hook timeout → 15 s. */
const TIME_SCALE = 0.05;
const GROUP = 'chaos';
/**
 * Real-time limits on waiting for a condition only end a schedule that can never settle: correctness never
 * depends on them (budgets inside the control plane are in queue time), so they are generous for loaded machines.
 */
const REAL_LIMIT_MS = 600_000;

export interface ScheduleResult {
  readonly seed: number;
  readonly ok: boolean;
  readonly violations: readonly string[];
  /** The failed schedule's trail (trail.ts): phases, events, every port call, the lifecycle's log lines. */
  readonly trailFile?: string;
  readonly stats: {
    readonly instancesLaunched: number;
    readonly continued: number;
    readonly abandoned: number;
    readonly timedOut: number;
    readonly crashes: number;
    readonly ec2Faulted: number;
    readonly ec2Throttled: number;
    readonly dynamoThrottled: number;
    readonly deliveries: number;
    readonly lateEventsReplayed: number;
    readonly kubeletPods: number;
    readonly enisDeletedByReconcile: number;
    /** Node items that recorded a pod subnet EC2 refused for room (the full-subnets family). */
    readonly nodesWithSubnetRefusals: number;
    readonly wallMs: number;
  };
}

function crashingDeps(schedule: ChaosSchedule, random: () => number, crashes: { n: number }) {
  const crashed = new Set<string>();
  return (deps: LifecycleDeps, instanceId: string, delivery: number): LifecycleDeps => {
    // One crash per instance at most: each costs a whole visibility timeout before SQS redelivers, and two of
    // them outlast a lifecycle hook (see docs/PERFORMANCE.md), which is a deployment limit, not an invariant.
    if (delivery > 3 || crashed.has(instanceId) || random() >= schedule.crashProbability) return deps;
    crashed.add(instanceId);
    // Dies right after its k-th EC2 call: any point between two calls of a launch or a terminate.
    const sw = new CrashSwitch(1 + Math.floor(random() * 4));
    const counting = { tick: sw.tick.bind(sw) };
    sw.tick = (name: string) => {
      try {
        counting.tick(name);
      } catch (err) {
        crashes.n += 1;
        throw err;
      }
    };
    return {
      ...deps,
      ec2: crashable(deps.ec2, sw, true, 'ec2'),
      store: crashable(deps.store, sw, false, 'store'),
      autoScaling: crashable(deps.autoScaling, sw, false, 'autoScaling'),
      requeue: crashable(deps.requeue, sw, false, 'requeue'),
    };
  };
}

/**
 * Runs one schedule end to end and checks the invariants once everything has settled: the scale-out under its
 * faults; 64-way kubelet churn on a READY node; late and duplicated events; optionally the scale-in; then the
 * faults are lifted, one reconcile runs (its two passes back to back, minimum ages 0), and the checker must
 * find nothing — plus: every launch action completed (none left to time out unless the schedule forced a short
 * timeout), no duplicate address, no lost lease, nothing in the DLQ.
 */
export async function runSchedule(
  schedule: ChaosSchedule,
  options: { readonly trailDir?: string } = {},
): Promise<ScheduleResult> {
  const started = Date.now();
  const random = seededRandom(schedule.seed);
  const crashes = { n: 0 };
  const violations: string[] = [];
  const trail = new ChaosTrail();
  const crashing = crashingDeps(schedule, random, crashes);
  const c = await ControlPlaneCloud.start({
    timeScale: TIME_SCALE,
    seed: schedule.seed,
    random,
    ec2: {
      throttling: schedule.throttleStorm,
      delays: { eventualConsistencyMs: schedule.eventualConsistencyMs },
      eventualConsistencyScope: 'all',
    },
    sqs: { duplicateRate: schedule.duplicateRate },
    config: {
      prefixDelegation: schedule.prefixDelegation,
      eniMinAgeForGcMs: 0,
      ...(schedule.fillSubnets ? { podSubnetTags: { ...FILL_POD_TAG } } : {}),
    },
    maxConcurrency: 5,
    // Lambda would freeze a timed-out invocation; the simulator cannot, so give invocations Lambda's maximum.
    functionTimeoutS: 900,
    // Every wait heartbeats, so the hook only has to outlast one invocation; the SDK's retry backoff runs in
    // real time while everything else is scaled 20×, and a loaded machine stretches an invocation further:
    // 3600 AWS s (180 real s) is that slack.
    hookTimeoutS: schedule.shortHookTimeoutS ?? 3600,
    wrapDeps: (deps, id, delivery) => trail.deps(crashing(deps, id, delivery), id, delivery),
  });
  c.cloud.bus.subscribe((event) => trail.event(event));
  // The harness's own reads: past the DynamoDB faults, which are the control plane's to meet.
  const observer = observerOf(c);
  const fleet = schedule.hookless ? new HooklessFleet(c, observer.store) : undefined;
  let lateEventsReplayed = 0;
  let kubeletPods = 0;
  let deleted = 0;
  let burst: NodeJS.Timeout | undefined;
  let filling: Promise<unknown> | undefined;
  let victim: string | undefined;
  const facts = async () => ({
    schedule,
    nodes: await observer.store.listNodes(),
    hookResults: c.outcomes,
    queue: c.queue.counts(),
    dlq: c.dlq.counts(),
    deliveries: Object.fromEntries(c.deliveries),
    instances: Object.fromEntries(
      [...new Set([...(fleet?.launched ?? []), ...c.groupInstances(GROUP).map((i) => i.instanceId)])].map((id) => [
        id,
        c.cloud.ec2.api.getInstance(id)?.state,
      ]),
    ),
  });
  trail.phase('start');
  try {
    const fill = schedule.fillSubnets ? await seedFillSubnets(c) : undefined;
    const admin = c.cloud.ec2.admin;
    for (const f of schedule.ec2Faults) admin.failNext(f);
    // A burst, as AWS's are: a storm that never ends outlasts any lifecycle hook (see docs/PERFORMANCE.md).
    burst = setTimeout(() => admin.clearFaults(), schedule.ec2BurstMs);
    burst.unref();
    if (schedule.throttleStorm) {
      for (const action of ['CreateNetworkInterface', 'AttachNetworkInterface', 'ModifyNetworkInterfaceAttribute'])
        admin.setBucket(action, { bucket: 2, refillPerSecond: 1 });
    }
    c.dynamo.faultRate = schedule.dynamoThrottleRate;
    // A Lambda outage longer than the hook timeout: the first launches time out. Both ends of the outage are
    // conditions, not durations, so a loaded machine cannot turn the replacements' launches into timeouts too.
    if (schedule.shortHookTimeoutS !== undefined) c.mapping.setEnabled(false);
    if (fleet) fleet.launch(schedule.instances, schedule.instanceType);
    // The full-subnets family: the group in the pod subnets' AZ, one launch first; once it is through, another
    // tenant fills the roomiest pod subnet and the scale-out goes on, so the later launches plan against it.
    else
      c.createGroup(
        GROUP,
        schedule.instanceType,
        fill ? 1 : schedule.instances,
        fill ? [c.subnetIds[0]!] : c.subnetIds,
      );
    if (fill) {
      filling = waitFor(() => c.outcomes.length > 0, REAL_LIMIT_MS)
        .then(() => fillSubnet(fill.filled, schedule.fillSubnets!))
        .catch((err: unknown) => violations.push(`full subnets: the filler failed: ${String(err)}`))
        .finally(() =>
          c.cloud.autoScaling.simulator.updateGroup(GROUP, {
            maxSize: schedule.instances * 2,
            desiredCapacity: schedule.instances,
          }),
        );
    }
    if (schedule.shortHookTimeoutS !== undefined) {
      const timedOutAll = await waitFor(
        () => c.outcomes.filter((o) => o.result === 'TIMEOUT').length >= schedule.instances,
        REAL_LIMIT_MS,
      );
      if (!timedOutAll) violations.push('forced hook timeouts did not happen');
      c.cloud.autoScaling.simulator.putLifecycleHook({
        groupName: GROUP,
        name: 'vpc-lease-launch',
        heartbeatTimeoutS: 3600,
      });
      c.mapping.setEnabled(true);
    }

    if (schedule.terminateMidProvisioning > 0) {
      // The first launch still in its hook; '' when every launch finished before one could be picked.
      victim = await waitFor(() => {
        if (fleet) return fleet.victim();
        const instances = c.groupInstances(GROUP);
        const waiting = instances.find((i) => i.lifecycleState === 'Pending:Wait')?.instanceId;
        if (waiting) return waiting;
        return instances.length >= schedule.instances && instances.every((i) => i.lifecycleState === 'InService')
          ? ''
          : undefined;
      }, REAL_LIMIT_MS);
      if (victim) c.cloud.ec2.api.terminateInstance(victim);
      trail.phase(`terminated mid-provisioning: ${victim || 'none'}`);
    }

    const settled = async (timeoutMs: number): Promise<boolean> =>
      (await waitFor(async () => {
        const instances = c.groupInstances(GROUP);
        const queue = c.queue.counts();
        if (fleet)
          return (await fleet.finished()) && queue.visible + queue.inFlight + queue.delayed === 0 && c.inFlight === 0;
        return (
          instances.every((i) => i.lifecycleState === 'InService' || i.lifecycleState.startsWith('Terminat')) &&
          instances.filter((i) => i.lifecycleState === 'InService').length >= schedule.instances &&
          queue.visible + queue.inFlight + queue.delayed === 0 &&
          c.inFlight === 0
        );
      }, timeoutMs)) === true;
    if (!(await settled(REAL_LIMIT_MS)))
      violations.push(`scale-out did not settle: ${JSON.stringify(c.groupInstances(GROUP))}`);
    if (filling) await filling;
    trail.phase('scale-out settled');
    // Read before the scale-in turns every node GONE: how each launch ended.
    const nodesAtSettle = await observer.store.listNodes();
    violations.push(...launchOutcomeViolations({ hookResults: c.outcomes, nodes: nodesAtSettle, victim }));
    if (fill) {
      // The harness's own read of the room left (EC2's count), past any fault the schedule still injects.
      const subnets = c.cloud.ec2.admin
        .snapshot()
        .subnets.filter((s) => [fill.filled, fill.spare].includes(s.subnetId));
      const freeAddresses = Object.fromEntries(subnets.map((s) => [s.subnetId, s.availableIpAddressCount]));
      const minLeases = c.deps.config.minLeases;
      violations.push(
        ...fillOutcomeViolations({ hookResults: c.outcomes, nodes: nodesAtSettle, victim, freeAddresses, minLeases }),
      );
    }
    // A fragmented subnet still shows the most free addresses: a later launch must have met its refusal.
    const refusedNodes = nodesAtSettle.filter((n) => (n.subnetRefusals ?? []).length > 0);
    if (schedule.fillSubnets === 'fragment' && refusedNodes.length === 0)
      violations.push(`full subnets: no node item recorded a refusal of the fragmented ${fill?.filled}`);

    // 64 kubelets on one READY node while DynamoDB is still throttling.
    const ready = (await observer.store.listNodes()).find((n) => n.phase === 'READY');
    if (ready) {
      const api = new LightDynamoClient({
        endpoint: c.dynamo.endpoint,
        region: c.cloud.region,
        // The node's own instance-profile session: its requests go through the enforcing endpoint's node policy.
        credentials: async () => c.cloud.nodeSession(ready.instanceId).credentials,
        maxAttempts: 8,
        // A 2 s budget per request is a wall-clock verdict that a loaded machine fails; the store's own
        // retries are what is under test.
        timeoutMs: 30_000,
      });
      const store = new DynamoLeaseStore({ api, tableName: TABLE });
      const k = await runKubeletLoops(store, ready.instanceArn, schedule.kubeletLoops, schedule.kubeletMs);
      kubeletPods = k.pods;
      trail.phase('kubelets done');
      if (k.duplicates > 0) violations.push(`invariant 1: ${k.duplicates} duplicate address holdings`);
      if (k.leftClaimed > 0) violations.push(`lost leases: ${k.leftClaimed} still CLAIMED after every DEL`);
      const iam = c.cloud.iam.counts;
      if (iam.allowed === 0) violations.push('invariant 7: the kubelets never went through the node policy');
      if (iam.denied > 0) violations.push(`invariant 7: ${iam.denied} node requests denied by the node policy`);
    }

    // Lift the faults; late events arrive after everything settled (reordered after later ones).
    admin.clearFaults();
    admin.setThrottling(false);
    c.dynamo.faultRate = 0;
    if (schedule.replayLateEvents) {
      for (const event of c.cloud.bus.events()) {
        if (random() < 0.5) continue;
        c.queue.send({ body: JSON.stringify(event) });
        lateEventsReplayed += 1;
      }
      if (!(await settled(REAL_LIMIT_MS))) violations.push('late events did not settle');
      trail.phase('late events settled');
    }

    if (schedule.scaleInAtEnd) {
      if (fleet) fleet.terminateAll();
      else c.cloud.autoScaling.simulator.setDesiredCapacity(GROUP, 0);
      const gone = await waitFor(async () => {
        const queue = c.queue.counts();
        const nodes = await observer.store.listNodes();
        const ids = [...new Set(c.cloud.bus.events().map((e) => instanceIdOf(JSON.stringify(e))))].filter(Boolean);
        return (
          c.groupInstances(GROUP).length === 0 &&
          // DeleteOnTermination acts when EC2 reports the instance terminated, after its shutdown.
          ids.every((id) => c.cloud.ec2.api.getInstance(id)?.state === 'terminated') &&
          queue.visible + queue.inFlight + queue.delayed === 0 &&
          c.inFlight === 0 &&
          nodes.every((n) => n.phase === 'GONE' || n.phase === 'FAILED')
        );
      }, REAL_LIMIT_MS);
      if (!gone) violations.push('scale-in did not settle');
      trail.phase('scale-in settled');
    }

    // One reconcile: the scheduled pass, run twice back to back so its mark is followed by its delete.
    const reconcileDeps = {
      ec2: new SdkReconcileEc2(new SdkEc2({}), undefined),
      store: c.deps.store,
      config: { clusterName: c.deps.config.clusterName, eniMinAgeForGcMs: 0 },
      clock: systemClock,
      logger: silentLogger,
      minMarkAgeMs: 0,
      driftGraceMs: 0,
    };
    for (let pass = 0; pass < 2; pass++) deleted += (await reconcile(reconcileDeps)).deleted.length;

    trail.phase('reconciled');
    const report = await c.check(10 * 60_000);
    violations.push(...formatViolations(report).split('\n').filter(Boolean));
    if (schedule.scaleInAtEnd) {
      const left = await c.deps.ec2.describeNetworkInterfaces({
        tags: { 'vpc-lease:cluster': c.deps.config.clusterName },
      });
      if (left.length > 0) violations.push(`invariant 3: ${left.length} ENIs left after scale-in and one reconcile`);
    }
    const launched = new Set(
      c.cloud.bus
        .events()
        .filter((e) => e['detail-type'] === LAUNCH_DETAIL_TYPE)
        .map((e) => (e.detail as { EC2InstanceId: string }).EC2InstanceId),
    );
    const resolved = new Set(c.outcomes.map((o) => o.instanceId));
    const terminatedEarly = new Set(
      [...launched].filter((id) => c.cloud.ec2.api.getInstance(id)?.state === 'terminated'),
    );
    for (const id of launched)
      if (!resolved.has(id) && !terminatedEarly.has(id))
        violations.push(`invariant 4: launch of ${id} never completed`);
    if (fleet) violations.push(...(await fleet.violations()));
    const timedOut = c.outcomes.filter((o) => o.result === 'TIMEOUT').length;
    if (timedOut > 0 && schedule.shortHookTimeoutS === undefined)
      violations.push(`invariant 4: ${timedOut} lifecycle actions timed out`);
    const dlq = c.dlq.counts();
    if (dlq.visible + dlq.inFlight > 0) {
      const bodies = c.dlq.takeForMove(10).map((m) => {
        const e = JSON.parse(m.body) as { 'detail-type'?: string; detail?: Record<string, unknown> };
        const id = instanceIdOf(m.body);
        return `${e['detail-type'] ?? e.detail?.['kind'] ?? 'continuation'} of ${id} (${c.cloud.ec2.api.getInstance(id)?.state ?? 'unknown'})`;
      });
      violations.push(`${dlq.visible + dlq.inFlight} messages in the DLQ: ${bodies.join('; ')}`);
    }

    const counts = admin.counts();
    trail.phase('checked');
    const stats: ScheduleResult['stats'] = {
      instancesLaunched: fleet ? fleet.launched.length : launched.size,
      continued: fleet
        ? nodesAtSettle.filter((n) => n.phase === 'READY' && fleet.launched.includes(n.instanceId)).length
        : c.outcomes.filter((o) => o.result === 'CONTINUE').length,
      abandoned: fleet
        ? nodesAtSettle.filter((n) => n.phase === 'FAILED').length
        : c.outcomes.filter((o) => o.result === 'ABANDON').length,
      timedOut,
      crashes: crashes.n,
      ec2Faulted: Object.values(counts).reduce((s, a) => s + a.faulted, 0),
      ec2Throttled: Object.values(counts).reduce((s, a) => s + a.throttled, 0),
      dynamoThrottled: [...c.dynamo.throttled.values()].reduce((s, n) => s + n, 0),
      deliveries: [...c.deliveries.values()].reduce((s, n) => s + n, 0),
      lateEventsReplayed,
      kubeletPods,
      enisDeletedByReconcile: deleted,
      nodesWithSubnetRefusals: refusedNodes.length,
      wallMs: Date.now() - started,
    };
    const trailFile =
      violations.length > 0
        ? await trail.write(options.trailDir ?? DEFAULT_TRAIL_DIR, schedule.seed, {
            violations,
            stats,
            ec2Calls: counts,
            ...(await facts()),
          })
        : undefined;
    return { seed: schedule.seed, ok: violations.length === 0, violations, ...(trailFile ? { trailFile } : {}), stats };
  } catch (err) {
    // A schedule that threw is diagnosed from the same trail; the caller reports the error itself.
    const crashedFacts = await facts().catch((e: unknown) => ({ factsUnreadable: String(e) }));
    const file = await trail.write(options.trailDir ?? DEFAULT_TRAIL_DIR, schedule.seed, {
      violations: [...violations, `schedule threw: ${err instanceof Error ? err.stack : String(err)}`],
      ...crashedFacts,
    });
    throw new Error(`${err instanceof Error ? err.message : String(err)} (trail: ${file})`, { cause: err });
  } finally {
    clearTimeout(burst);
    observer.close();
    await c.close();
  }
}
