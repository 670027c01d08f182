import { readFileSync } from 'node:fs';
import { DEFAULT_LATENCY_MS } from '../../infra/local/ec2/latency.js';
import { DEFAULT_DELAYS } from '../../infra/local/ec2/simulator.js';
import { parseControlPlaneConfig } from '../../shared/config/control-plane.js';
import { EC2_BUDGET_ENV } from '../../shared/ec2/budget-env.js';
import { BudgetedEc2 } from '../../shared/ec2/budgeted-ec2.js';
import { MUTATING_ACTIONS } from '../../shared/ec2/port.js';
import { formatViolations } from '../../shared/invariants/checker.js';
import type { LifecycleDeps } from '../../shared/lifecycle/deps.js';
import { planLaunch } from '../../shared/planner/launch-plan.js';
import { limitsOf } from '../control-plane/support/limits.js';
import { ControlPlaneCloud, waitFor } from './control-plane-cloud.js';
import { type BucketFigure, tokenBucketLowerBound } from './lower-bound.js';
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
}

const throttling = JSON.parse(
  readFileSync(new URL('../../shared/data/ec2-api-throttling.json', import.meta.url), 'utf8'),
) as { buckets: Record<string, BucketFigure>; otherMutating: BucketFigure };

const bucketOf = (action: string): BucketFigure => throttling.buckets[action] ?? throttling.otherMutating;
const JITTER = 0.7; // the latency model draws within ±30 %

/**
 * `scale`: N instances launched at once by one Auto Scaling group, on the simulator with AWS's token buckets
 * and latency model at AWS's pace, through the whole event path into the lifecycle Lambda (at the construct's
 * concurrency). Measures the time from the scale-out to the last CompleteLifecycleAction, next to the bound
 * the buckets imply; EC2 calls per node by action; RequestLimitExceeded answers; Lambda concurrency used;
 * lifecycle timeouts and abandons; and the invariant checker's verdict at the end.
 */
export async function runScaleBench(options: ScaleBenchOptions): Promise<Record<string, unknown>> {
  const config = parseControlPlaneConfig({ prefixDelegation: options.prefixDelegation });
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
  const bound = tokenBucketLowerBound({
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

  const c = await ControlPlaneCloud.start({
    timeScale: options.timeScale,
    seed: options.seed,
    ec2: { throttling: true, latency: true },
    config: { prefixDelegation: options.prefixDelegation },
    maxConcurrency: options.maxConcurrency,
    bigSubnets: options.instances > 150,
    ec2Budget: options.ec2Budget ?? process.env[EC2_BUDGET_ENV] !== 'off',
  });
  try {
    const t0 = Date.now();
    c.createGroup('scale', options.instanceType, options.instances);
    // Generous: five times the bound plus the boot time, scaled; a run that misses it reports what is left.
    const budgetMs = (bound.lowerBoundMs * 5 + 120_000) * Math.max(options.timeScale, 0.05);
    const settled = await waitFor(() => {
      const instances = c.groupInstances('scale');
      return (
        instances.length >= options.instances &&
        instances.every((i) => !i.lifecycleState.startsWith('Pending:Wait') && i.lifecycleState !== 'Pending')
      );
    }, budgetMs);
    const doneAtMs = Math.max(t0, ...c.outcomes.map((o) => o.atMs));
    const elapsedMs = (doneAtMs - t0) / options.timeScale;
    const completions = c.outcomes.filter((o) => o.result === 'CONTINUE').map((o) => (o.atMs - t0) / options.timeScale);
    const continued = completions.length;
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
    const report = await c.check(10 * 60_000);
    const ratioToBound = ratio(elapsedMs, bound.lowerBoundMs);
    return {
      instances: options.instances,
      instanceType: options.instanceType,
      prefixDelegation: options.prefixDelegation,
      timeScale: options.timeScale,
      lambdaMaxConcurrency: options.maxConcurrency,
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
      tokenBucketLowerBoundMs: bound.lowerBoundMs,
      boundSetBy: bound.bindingAction,
      ratioToLowerBound: ratioToBound,
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
      dlqMessages: c.dlq.counts().visible,
      invariantViolations: report.violations.length,
      firstViolation: formatViolations(report).split('\n')[0] || undefined,
      targets: {
        within1_1xLowerBound: ratioToBound <= 1.1,
        noLifecycleTimeout: timedOut === 0,
      },
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
  for (const stats of budgets) for (const [k, v] of Object.entries(stats)) sum[k] = (sum[k] ?? 0) + v;
  return sum;
}
