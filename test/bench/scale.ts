import { loadavg } from 'node:os';
import { type _InstanceType, CreateLaunchTemplateCommand, EC2Client } from '@aws-sdk/client-ec2';
import { DEFAULT_LATENCY_MS } from '../../local-cloud/ec2/latency.js';
import { DEFAULT_DELAYS } from '../../local-cloud/ec2/simulator.js';
import { type ControlPlaneConfig, parseControlPlaneConfig } from '../../shared/config/control-plane.js';
import { bucketFor, type Ec2Buckets } from '../../shared/ec2/account-buckets.js';
import { EC2_BUDGET_ENV } from '../../shared/ec2/budget-env.js';
import { BudgetedEc2 } from '../../shared/ec2/budgeted-ec2.js';
import { MUTATING_ACTIONS } from '../../shared/ec2/port.js';
import { launchTemplateEniTags } from '../../shared/ec2/tags.js';
import { formatViolations } from '../../shared/invariants/checker.js';
import type { LifecycleDeps } from '../../shared/lifecycle/deps.js';
import { planLaunch } from '../../shared/planner/launch-plan.js';
import { planTemplateEnis } from '../../shared/planner/template-plan.js';
import { limitsOf } from '../control-plane/support/limits.js';
import { CLUSTER, ControlPlaneCloud, LIFECYCLE_BATCH_SIZE, waitFor } from './control-plane-cloud.js';
import { selfCpuMs } from './cpu.js';
import { adoptionLowerBound, type BucketFigure, tokenBucketLowerBound } from './lower-bound.js';
import { percentile, ratio, round } from './stats.js';

export interface ScaleBenchOptions {
  readonly instances: number;
  readonly instanceType: string;
  readonly prefixDelegation: boolean;
  /** Real ms per AWS ms; 1 = AWS's pace, so the buckets and the handler's real work keep their proportions. */
  readonly timeScale: number;
  readonly maxConcurrency: number;
  readonly seed: number;
  /** The account's EC2 rate budget in front of EC2 (default on; `VPC_LEASE_EC2_BUDGET=off` for a comparison). */
  readonly ec2Budget?: boolean;
  /** Pod ENIs declared in the group's launch template and adopted by the Lambda (no mutating EC2 call). */
  readonly adopt?: boolean;
  /** The Lambdas reach dynalite without the IAM endpoint's extra hop (ControlPlaneCloud's dynamoWithoutIam). */
  readonly dynamoWithoutIam?: boolean;
  /** The account's raised EC2 buckets (both the simulator's and the budget's); AWS's published ones elsewhere. */
  readonly ec2Buckets?: Ec2Buckets;
}

const JITTER = 0.7; // the latency model draws within ±30 %
/**
 * What adoption calls per SQS batch (shared/lifecycle/batch-handler.ts), one after the other; limits and subnet
 * CIDRs are cached per container.
 */
const ADOPTION_DESCRIBES = ['DescribeInstances', 'DescribeNetworkInterfaces'];
/** A new on-demand table serves up to 4,000 write and 12,000 read request units per second (DynamoDB guide). */
const ON_DEMAND_WRITE_UNITS_PER_S = 4000;
const ON_DEMAND_READ_UNITS_PER_S = 12_000;
const WRITE_OPERATIONS = new Set(['PutItem', 'UpdateItem', 'DeleteItem', 'BatchWriteItem', 'TransactWriteItems']);

/** The node group's launch template with the pod ENIs the construct would declare (same planner, same tags). */
async function createPodEniTemplate(
  c: ControlPlaneCloud,
  config: ControlPlaneConfig,
  instanceType: string,
): Promise<string> {
  const name = 'scale-pod-enis';
  const client = new EC2Client({ region: c.cloud.region });
  try {
    await client.send(
      new CreateLaunchTemplateCommand({
        LaunchTemplateName: name,
        LaunchTemplateData: {
          InstanceType: instanceType as _InstanceType,
          NetworkInterfaces: [
            { DeviceIndex: 0, DeleteOnTermination: true },
            ...planTemplateEnis({ ...config, limits: limitsOf(instanceType) }).map((e) => ({
              DeviceIndex: e.deviceIndex,
              NetworkCardIndex: e.networkCardIndex,
              ...(e.prefixCount > 0
                ? { Ipv4PrefixCount: e.prefixCount }
                : { SecondaryPrivateIpAddressCount: e.ipCount }),
              DeleteOnTermination: true,
            })),
          ],
          TagSpecifications: [
            {
              ResourceType: 'network-interface',
              Tags: Object.entries(launchTemplateEniTags(CLUSTER)).map(([Key, Value]) => ({ Key, Value })),
            },
          ],
        },
      }),
    );
  } finally {
    client.destroy();
  }
  return name;
}

/**
 * `scale`: N instances launched at once by one Auto Scaling group, on the simulator with AWS's token buckets
 * and latency model at AWS's pace, through the whole event path into the lifecycle Lambda (at the construct's
 * concurrency). Measures the time from the scale-out to the last CompleteLifecycleAction, next to the bound
 * the buckets imply; EC2 calls per node by action; RequestLimitExceeded answers; Lambda concurrency used;
 * lifecycle timeouts and abandons; and the invariant checker's verdict at the end.
 */
export async function runScaleBench(options: ScaleBenchOptions): Promise<Record<string, unknown>> {
  const config = parseControlPlaneConfig({ prefixDelegation: options.prefixDelegation });
  const bucketOf = (key: string): BucketFigure => bucketFor(key, options.ec2Buckets);
  const limits = limitsOf(options.instanceType);
  const plan = planLaunch({
    limits,
    availabilityZone: 'us-east-1a',
    prefixDelegation: options.prefixDelegation,
    minLeases: config.minLeases,
    warmHighLeases: config.warmHighLeases,
    maxPods: config.maxPods,
    subnets: [{ subnetId: 's', cidr: '10.0.0.0/16', availabilityZone: 'us-east-1a', availableIpCount: 60_000 }],
    existing: [{ deviceIndex: 0, networkCardIndex: limits.defaultNetworkCardIndex }],
  });
  const podEnis = options.instances * plan.enis.length;
  const createBound = tokenBucketLowerBound({
    podEnis,
    buckets: {
      create: bucketOf('CreateNetworkInterface'),
      attach: bucketOf('AttachNetworkInterface'),
      modify: bucketOf('ModifyNetworkInterfaceAttribute'),
    },
    minLatencyMs: {
      create: DEFAULT_LATENCY_MS['CreateNetworkInterface']! * JITTER,
      attach: DEFAULT_LATENCY_MS['AttachNetworkInterface']! * JITTER,
      modify: DEFAULT_LATENCY_MS['ModifyNetworkInterfaceAttribute']! * JITTER,
    },
    attachMs: DEFAULT_DELAYS.attachMs,
  });
  const adopt = options.adopt === true;
  // The Describe part of the adoption bound, known before the run (the DynamoDB part needs the measured units).
  const adoptionBound = (writeUnits: number, readUnits: number) =>
    adoptionLowerBound({
      nodes: options.instances,
      nodesPerDescribe: LIFECYCLE_BATCH_SIZE,
      describeChain: ADOPTION_DESCRIBES,
      describeBucket: bucketOf('Describe*'),
      minDescribeLatencyMs: DEFAULT_LATENCY_MS['DescribeInstances']! * JITTER,
      writeUnits,
      readUnits,
      writeUnitsPerSecond: ON_DEMAND_WRITE_UNITS_PER_S,
      readUnitsPerSecond: ON_DEMAND_READ_UNITS_PER_S,
    });
  const estimatedBoundMs = adopt ? adoptionBound(0, 0).lowerBoundMs : createBound.lowerBoundMs;

  const c = await ControlPlaneCloud.start({
    timeScale: options.timeScale,
    seed: options.seed,
    ec2: { throttling: true, latency: true },
    config: { prefixDelegation: options.prefixDelegation },
    maxConcurrency: options.maxConcurrency,
    bigSubnets: options.instances > 150,
    ec2Budget: options.ec2Budget ?? process.env[EC2_BUDGET_ENV] !== 'off',
    // The 4 s a record may sleep for budget tokens is meant in AWS time, like the budget's refill.
    budgetWaitMs: Math.round(4000 * options.timeScale),
    dynamoWithoutIam: options.dynamoWithoutIam === true,
    dynaliteProcess: options.dynamoWithoutIam === true,
    ...(options.ec2Buckets ? { ec2Buckets: options.ec2Buckets } : {}),
  });
  try {
    const loadAtStart = loadavg().map((l) => round(l));
    const template = adopt ? await createPodEniTemplate(c, config, options.instanceType) : undefined;
    c.cloud.ec2.admin.resetCounts();
    const t0 = Date.now();
    // When each action's calls took effect: where a run lost time against the bound shows as a late start or a gap.
    const callAtS = new Map<string, number[]>();
    const stopListening = c.cloud.ec2.api.onCall((call) => {
      const times = callAtS.get(call.action) ?? [];
      times.push((Date.now() - t0) / 1000 / options.timeScale);
      callAtS.set(call.action, times);
    });
    const cpu0Ms = selfCpuMs();
    c.createGroup('scale', options.instanceType, options.instances, c.subnetIds, template);
    // Generous: five times the bound plus the boot time, scaled, plus real time for the local cloud's own CPU
    // (30–40 ms a node on one thread, many times that on a loaded machine), which no time scale stretches: once
    // batching cut the adoption bound to a few seconds, the bound alone gave 1,000 loaded launches too little.
    // A run that misses it reports what is left.
    const budgetMs = (estimatedBoundMs * 5 + 120_000) * Math.max(options.timeScale, 0.05) + options.instances * 400;
    // A long run says how far it is on stderr (stdout stays one JSON line).
    const progress = setInterval(() => {
      const states = new Map<string, number>();
      for (const i of c.groupInstances('scale')) states.set(i.lifecycleState, (states.get(i.lifecycleState) ?? 0) + 1);
      const results = new Map<string, number>();
      for (const o of c.outcomes) results.set(o.result, (results.get(o.result) ?? 0) + 1);
      const s = Math.round((Date.now() - t0) / 1000);
      process.stderr.write(
        `[scale ${s} s] ${JSON.stringify(Object.fromEntries(states))} ${JSON.stringify(Object.fromEntries(results))}\n`,
      );
    }, 30_000);
    const settled = await waitFor(() => {
      const instances = c.groupInstances('scale');
      // The simulator moves an instance on when it takes the completion, before the handler's call returns and
      // its outcome is recorded: wait for the outcomes too, or the last few are missing from the figures.
      const recorded = new Set(c.outcomes.map((o) => o.instanceId));
      return (
        instances.length >= options.instances &&
        instances.every((i) => !i.lifecycleState.startsWith('Pending:Wait') && i.lifecycleState !== 'Pending') &&
        instances.every((i) => recorded.has(i.instanceId))
      );
    }, budgetMs).finally(() => clearInterval(progress));
    stopListening();
    // Everything runs in this process (Lambdas, dynalite, simulators): its CPU is the local cloud's.
    const cloudCpuMs = selfCpuMs() - cpu0Ms;
    const cpuWindowMs = Date.now() - t0;
    const doneAtMs = Math.max(t0, ...c.outcomes.map((o) => o.atMs));
    const elapsedMs = (doneAtMs - t0) / options.timeScale;
    const completions = c.outcomes.filter((o) => o.result === 'CONTINUE').map((o) => (o.atMs - t0) / options.timeScale);
    const continued = completions.length;
    // Launch event → CONTINUE for each instance, in AWS ms: what a node waits on before it can take pods.
    const held = c.outcomes.flatMap((o) =>
      o.result === 'CONTINUE' && o.heldMs !== undefined ? [o.heldMs / options.timeScale] : [],
    );
    const abandoned = c.outcomes.filter((o) => o.result === 'ABANDON').length;
    const timedOut = c.outcomes.filter((o) => o.result === 'TIMEOUT').length;
    const counts = c.cloud.ec2.admin.counts();
    const perNode = (n: number): number => round(n / options.instances);
    const mutatingPerNode = Object.fromEntries(
      Object.entries(counts)
        .filter(([action]) => MUTATING_ACTIONS.has(action))
        .map(([action, n]) => [action, perNode(n.calls)]),
    );
    const describePerNode = Object.fromEntries(
      Object.entries(counts)
        .filter(([action]) => action.startsWith('Describe'))
        .map(([action, n]) => [action, perNode(n.calls)]),
    );
    const throttled = Object.fromEntries(
      Object.entries(counts)
        .filter(([, n]) => n.throttled > 0)
        .map(([action, n]) => [action, n.throttled]),
    );
    // The invariant read-back is the harness's, not the system's: EC2's buckets and latencies would only slow it
    // (at 1,000 nodes the throttled Describes kept it busy for minutes after the figures were taken).
    c.cloud.ec2.admin.setThrottling(false);
    c.cloud.ec2.admin.setLatencyModel(false);
    const report = await c.check(10 * 60_000);
    const units = { write: 0, read: 0 };
    for (const [op, n] of c.dynamo.units) units[WRITE_OPERATIONS.has(op) ? 'write' : 'read'] += n;
    const bound = adopt
      ? adoptionBound(units.write, units.read)
      : { lowerBoundMs: createBound.lowerBoundMs, boundSetBy: createBound.bindingAction };
    const ratioToBound = ratio(elapsedMs, bound.lowerBoundMs);
    const mutatingCalls = Object.entries(counts)
      .filter(([action]) => MUTATING_ACTIONS.has(action))
      .reduce((sum, [, n]) => sum + n.calls, 0);
    return {
      instances: options.instances,
      instanceType: options.instanceType,
      prefixDelegation: options.prefixDelegation,
      podEnisFrom: adopt ? 'launch template (adopted)' : 'create-and-attach',
      timeScale: options.timeScale,
      lambdaMaxConcurrency: options.maxConcurrency,
      ec2Buckets: options.ec2Buckets ?? 'published',
      settled: settled === true,
      podEnisPerNode: plan.enis.length,
      leasesPerNode: plan.leaseCount,
      allLifecycleActionsCompletedMs: Math.round(elapsedMs),
      /** When launches completed: a steady slope means a throughput limit, a late tail means retries. */
      completedAtMs: {
        first: Math.round(percentile(completions, 0)),
        p50: Math.round(percentile(completions, 50)),
        p90: Math.round(percentile(completions, 90)),
        last: Math.round(percentile(completions, 100)),
      },
      /** Each launch hook held, from its event to CONTINUE (AWS ms): the p50 ≤ 2 s and p99 ≤ 10 s. */
      hookHeldMs: {
        n: held.length,
        p50: Math.round(percentile(held, 50)),
        p90: Math.round(percentile(held, 90)),
        p99: Math.round(percentile(held, 99)),
        max: Math.round(percentile(held, 100)),
      },
      /** Seconds after the group was created at which calls took effect: first, p10, p50, p90, last. */
      callsTakenEffectAtS: Object.fromEntries(
        [...callAtS].map(([action, times]) => [
          action,
          [0, 10, 50, 90, 100].map((p) => round(percentile(times, p), 1)),
        ]),
      ),
      /**
       * The hold no code can beat on a new on-demand table: the k-th launch done needs k launches' write units
       * through the table's 4,000 a second, so the median waits at least half of them (AWS ms).
       */
      ...(adopt
        ? {
            hookHeldFloorMs: Object.fromEntries(
              [50, 99].map((p) => [
                `p${p}`,
                Math.round(((p / 100) * units.write * 1000) / ON_DEMAND_WRITE_UNITS_PER_S),
              ]),
            ),
          }
        : {}),
      tokenBucketLowerBoundMs: bound.lowerBoundMs,
      boundSetBy: bound.boundSetBy,
      ratioToLowerBound: ratioToBound,
      dynamoDbCapacityUnits: { write: round(units.write), read: round(units.read) },
      mutatingEc2CallsPerNode: perNode(mutatingCalls),
      lifecycleActions: { continued, abandoned, timedOut },
      mutatingEc2CallsPerNodeByAction: mutatingPerNode,
      describeCallsPerNodeByAction: describePerNode,
      requestLimitExceeded: Object.values(throttled).reduce((s, n) => s + n, 0),
      requestLimitExceededByAction: throttled,
      ec2Budget: budgetStats(c.containers),
      lambdaContainers: c.containers.length,
      lambdaConcurrencyUsed: c.maxInFlight,
      lambdaInvocations: c.mapping.stats().invocations,
      lambdaRecordsHandled: c.mapping.stats().recordsDeleted + c.mapping.stats().recordsFailed,
      lambdaHandlerSecondsTotal: round(c.handlerMs.reduce((sum, ms) => sum + ms, 0) / 1000),
      /** CPU of the whole local cloud until every action completed; 1.0 of one core is all one thread can do. */
      localCloudCpuMsPerNode: Math.round(cloudCpuMs / options.instances),
      localCloudCoresBusy: round(cloudCpuMs / cpuWindowMs),
      dynamoPath: options.dynamoWithoutIam
        ? 'counting proxy → dynalite (its own process)'
        : 'counting proxy → IAM endpoint → dynalite',
      dlqMessages: c.dlq.counts().visible,
      invariantViolations: report.violations.length,
      firstViolation: formatViolations(report).split('\n')[0] || undefined,
      targets: {
        within1_1xLowerBound: ratioToBound <= 1.1,
        ...(adopt ? { zeroMutatingCallsPerNode: mutatingCalls === 0 } : {}),
        noLifecycleTimeout: timedOut === 0,
        ...(adopt
          ? { hookHeldP50Within2s: percentile(held, 50) <= 2000, hookHeldP99Within10s: percentile(held, 99) <= 10_000 }
          : {}),
      },
      loadAverageAtStart: loadAtStart,
    };
  } finally {
    await c.close();
  }
}

/** The budget's counters summed over the Lambda containers, or 'off'. */
function budgetStats(containers: readonly LifecycleDeps[]): Record<string, number> | 'off' {
  const budgets = containers.flatMap((d) => (d.ec2 instanceof BudgetedEc2 ? [d.ec2.budget.stats] : []));
  if (budgets.length === 0) return 'off';
  const sum: Record<string, number> = {};
  // Counts add up across containers; a maximum (`…Max`) is the largest of them.
  for (const stats of budgets)
    for (const [k, v] of Object.entries(stats))
      sum[k] = k.endsWith('Max') ? Math.max(sum[k] ?? 0, v) : (sum[k] ?? 0) + v;
  return sum;
}
