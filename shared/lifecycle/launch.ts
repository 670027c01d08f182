import { instanceArn } from '../domain/arn.js';
import { isInstanceProvisionable } from '../domain/instance-states.js';
import type { InstanceLimits } from '../domain/limits.js';
import type { EniRecord, NodePhase, NodeRecord } from '../domain/node.js';
import { declareEc2Calls } from '../ec2/ec2-call-context.js';
import { type Ec2ApiError, isEc2Error } from '../ec2/errors.js';
import type { Ec2Instance } from '../ec2/port.js';
import { eniClientToken } from '../ec2/tags.js';
import { errorMessage, NodeNotFoundError, VersionConflictError } from '../errors.js';
import type { Logger } from '../log.js';
import { METRIC_NAMES } from '../metrics.js';
import { PlanError } from '../planner/errors.js';
import { planLaunch } from '../planner/launch-plan.js';
import { leaseCapFor } from '../planner/max-pods.js';
import { sleepMs } from '../sleep.js';
import { failNode } from './abandon.js';
import { adoptTemplateEnis } from './adopt.js';
import { budgetWait } from './budget-wait.js';
import { done, type LifecycleDeps, type StepOutcome, type WaitOutcome, wait } from './deps.js';
import type { LaunchEvent } from './events.js';
import { recordHookCompletion } from './hook-completion.js';
import { clusterTagKey, deferToAnotherEvent, isTaggedForCluster } from './hookless.js';
import { pendingNodeRecord } from './pending-node.js';
import { expectedLeases } from './pod-eni.js';
import { applyChanges, type EniWriter } from './pod-eni-outcome.js';
import { advancePodEnis, podEniCallsAhead } from './pod-eni-steps.js';
import { candidateSubnets } from './subnets.js';

/**
 * The launch hook as a table of steps, one per phase of the node item, resumable at any await: every step's
 * result is written to the node item before the next EC2 call, so whatever invocation picks the event up next
 * (a duplicate, a redelivery after a crash, a re-enqueued retry) runs the step of the phase it reads — and a
 * step that ran but was not recorded is repeated harmlessly (ClientToken for creates, attachment read-back
 * for attaches, idempotent modifies and lease puts).
 *
 *   (no item) ──► PENDING ──► PROVISIONING (ENIs PLANNED → CREATED → ATTACHING → ATTACHED → LEASED) ──► READY
 *       │  └─ template ENIs adopted ─┘          │                                                       CONTINUE
 *       └──────────────┴────────────────────────┴──► FAILED + reason                                  ABANDON
 *
 * Each step returns a `Step`; `conclude` is the one place the lifecycle action is completed or abandoned.
 */
type Step =
  /** The node item moved to a new phase (written): run that phase's step next. */
  | { readonly kind: 'next'; readonly node: NodeRecord }
  /** Come back later (the record handler re-enqueues the event); what was done is on the node item. */
  | WaitOutcome
  /** Every pod ENI leased and the node READY: CONTINUE. `again`: an earlier invocation got here first. */
  | { readonly kind: 'ready'; readonly node: NodeRecord; readonly again: boolean }
  /** Unrecoverable: the node FAILED with `reason` (written by `conclude` unless `again`): ABANDON. */
  | { readonly kind: 'failed'; readonly node: NodeRecord | undefined; readonly reason: string; readonly again: boolean }
  /** Nothing for this event to do (not a node of this cluster, a late event): no lifecycle call. */
  | { readonly kind: 'ignored'; readonly summary: string };

interface Launch {
  readonly deps: LifecycleDeps;
  readonly event: LaunchEvent;
  readonly arn: string;
  readonly log: Logger;
  /** The instance as described in this invocation, once a step needed it. */
  seen?: { readonly instance: Ec2Instance; readonly limits: InstanceLimits };
}

const STEPS: Readonly<Record<NodePhase, (launch: Launch, node: NodeRecord) => Promise<Step>>> = {
  PENDING: planOrAdopt,
  PROVISIONING: provision,
  READY: async (_, node) => ({ kind: 'ready', node, again: true }),
  FAILED: async (_, node) => ({
    kind: 'failed',
    node,
    reason: node.failureReason ?? 'no reason recorded',
    again: true,
  }),
  DRAINING: async (_, node) => ignored(`node is ${node.phase}; a late launch event changes nothing`),
  GONE: async (_, node) => ignored(`node is ${node.phase}; a late launch event changes nothing`),
};

/** A step moves the phase forward or ends the invocation: (none) → PENDING → PROVISIONING → an end. */
const MAX_STEPS = 4;

export async function runLaunch(deps: LifecycleDeps, event: LaunchEvent): Promise<StepOutcome> {
  const arn = instanceArn(event.region, event.accountId, event.instanceId, event.partition);
  const log = deps.logger.child({ instanceId: event.instanceId, flow: 'launch', attempt: event.retry.attempt });
  const launch: Launch = { deps, event, arn, log };
  try {
    const node = await deps.store.getNode(arn);
    // Only on the node as this event found it: a node this invocation created is its own to provision.
    const deferred = deferToAnotherEvent(event, node);
    if (deferred) return deferred;
    let step = node ? await STEPS[node.phase](launch, node) : await firstLook(launch);
    for (let n = 1; step.kind === 'next'; n += 1) {
      if (n >= MAX_STEPS) throw new Error(`launch of ${event.instanceId}: phase ${step.node.phase} did not end`);
      step = await STEPS[step.node.phase](launch, step.node);
    }
    return await conclude(launch, step);
  } catch (err) {
    const step = await errorStep(launch, err);
    return step.kind === 'failed' ? conclude(launch, step) : step;
  }
}

/**
 * Gives up on a launch from outside the steps (the record handler, when the retry budget is spent): FAILED
 * with `reason`, ABANDON, through the same finishing point.
 */
export async function abandonLaunch(deps: LifecycleDeps, event: LaunchEvent, reason: string): Promise<StepOutcome> {
  const arn = instanceArn(event.region, event.accountId, event.instanceId, event.partition);
  const launch: Launch = { deps, event, arn, log: deps.logger.child({ instanceId: event.instanceId, flow: 'launch' }) };
  return conclude(launch, { kind: 'failed', node: await deps.store.getNode(arn), reason, again: false });
}

/** The one finishing point: READY → CONTINUE, FAILED → ABANDON (hook-less: nothing to complete). */
async function conclude(launch: Launch, step: Exclude<Step, { kind: 'next' }>): Promise<StepOutcome> {
  const { deps, event } = launch;
  switch (step.kind) {
    case 'wait':
      return step;
    case 'ignored':
      return done(step.summary);
    case 'ready': {
      const outcome = await completeAction(launch, 'CONTINUE');
      // The crash window between writing READY and completing: complete again ('gone' when it was done).
      if (step.again)
        return done(`node already READY; lifecycle action ${outcome === 'done' ? 'completed' : `was ${outcome}`}`);
      deps.metrics?.add(METRIC_NAMES.launchCompleted, {});
      const leases = expectedLeases(step.node, leaseCapFor(step.node.maxPods, deps.config.maxPods)).length;
      return done(`node READY with ${step.node.enis.length} pod ENI(s) and ${leases} lease(s); lifecycle ${outcome}`);
    }
    case 'failed': {
      if (step.again) {
        await completeAction(launch, 'ABANDON');
        return done(`node already FAILED: ${step.reason}`);
      }
      await failNode(deps, event, step.node, step.reason);
      const outcome = await completeAction(launch, 'ABANDON');
      if (outcome === 'none')
        return done(`launch failed (${step.reason}); no lifecycle hook, the instance stays NotReady`);
      return done(
        `launch abandoned (${step.reason}); lifecycle action ${outcome === 'done' ? 'completed' : 'already gone'}`,
      );
    }
  }
}

/** `none` when the launch came without a hook: nobody holds the instance and there is nothing to complete. */
async function completeAction(launch: Launch, result: 'CONTINUE' | 'ABANDON'): Promise<'done' | 'gone' | 'none'> {
  const { lifecycle } = launch.event;
  if (!lifecycle) return 'none';
  const outcome = await launch.deps.autoScaling.completeLifecycleAction(lifecycle, result);
  // Only the invocation whose call completed it knows when the hook let go ('gone': someone else, or it expired).
  if (outcome === 'done')
    await recordHookCompletion(launch.deps.store, launch.arn, launch.deps.clock.nowMs(), launch.log);
  return outcome;
}

/** (no item): decides whether this instance is a node of ours, then writes its first node item. */
async function firstLook(launch: Launch): Promise<Step> {
  const { deps, event } = launch;
  const seen = await describe(launch);
  if (seen.kind !== 'seen') return seen;
  if (!event.lifecycle && !isTaggedForCluster(deps.config, seen.instance))
    return ignored(`no hook and no ${clusterTagKey(deps.config)} tag: not a node of this cluster`);
  // Template ENIs: the node item is first written already PROVISIONING, not PENDING and then again.
  const adopted = await adoption(launch, undefined, seen.instance, seen.limits);
  if (adopted) return adopted;
  const fresh = pendingNodeRecord(deps, event, launch.arn, seen.instance, seen.limits);
  // What was written is what a read would return: no read-back.
  if (await deps.store.createNode(fresh)) return { kind: 'next', node: fresh };
  // A duplicate event created it first: carry on from whatever it recorded.
  const existing = await deps.store.getNode(launch.arn);
  if (!existing) throw new VersionConflictError(launch.arn, 0);
  return { kind: 'next', node: existing };
}

/** PENDING → PROVISIONING: the instance's template ENIs adopted, or its pod ENIs planned. */
async function planOrAdopt(launch: Launch, node: NodeRecord): Promise<Step> {
  const seen = await describe(launch);
  if (seen.kind !== 'seen') return seen;
  const adopted = await adoption(launch, node, seen.instance, seen.limits);
  if (adopted) return adopted;
  return planNode(launch, node, seen.instance, seen.limits);
}

/** PROVISIONING → READY: the pod-ENI steps (pod-eni-steps.ts), re-enqueued between them instead of sleeping. */
async function provision(launch: Launch, start: NodeRecord): Promise<Step> {
  const { deps } = launch;
  // A resumed launch whose ENIs all exist needs nothing from DescribeInstances (attach and verify go by id):
  // skipping it saves a round trip per re-enqueued attempt.
  let instance = launch.seen?.instance;
  if (!instance && start.enis.some((e) => e.step === 'PLANNED')) {
    const seen = await describe(launch);
    if (seen.kind !== 'seen') return seen;
    instance = seen.instance;
  }
  const waitMs = deps.attachWaitMs ?? 0;
  // Its remaining creates and attaches reserved at once: a launch deferred for tokens keeps its turn (rate-budget.ts).
  declareEc2Calls(podEniCallsAhead(start.enis));
  const outcome = await advancePodEnis(deps, start, instance, {
    minLeases: deps.config.minLeases,
    write: readyOnceLeased(deps),
    // A first look after waitMs (EC2 takes seconds to attach), one more after another waitMs if still attaching.
    ...(waitMs > 0 ? { attachPolls: 2, sleepBeforeFirstLook: true, sleep: () => sleepMs(waitMs) } : {}),
  });
  switch (outcome.kind) {
    case 'done': {
      const pending = outcome.node.enis.filter((e) => e.step !== 'LEASED');
      if (pending.length > 0) return wait(`ENIs not leased yet: ${pending.map((e) => e.deviceIndex).join(', ')}`);
      return { kind: 'ready', node: await markReady(deps, outcome.node), again: false };
    }
    case 'wait': {
      const deferred = budgetWait(...outcome.failures.map((f) => f.err));
      if (deferred) return deferred;
      const blocked = outcome.failures.map((f) => f.err).find((e) => isEc2Error(e, 'account'));
      if (!blocked) return wait(outcome.reason, outcome.delay);
      return blockedOnAccount(launch, outcome.node, blocked);
    }
    case 'refused':
      return { kind: 'failed', node: outcome.node, reason: outcome.reason, again: false };
    case 'gone':
      // The strict writer throws on a concurrent change; "gone" means the item itself went away.
      throw new NodeNotFoundError(start.instanceArn);
  }
}

/** The instance, described once per invocation; a wait or an end when there is nothing to provision. */
async function describe(launch: Launch): Promise<({ kind: 'seen' } & NonNullable<Launch['seen']>) | Step> {
  if (launch.seen) return { kind: 'seen', ...launch.seen };
  const instance = await launch.deps.ec2.describeInstance(launch.event.instanceId);
  if (!instance) return wait('instance not visible in EC2 yet');
  if (!isInstanceProvisionable(instance.state)) return ignored(`instance is ${instance.state}; nothing to provision`);
  launch.seen = { instance, limits: await launch.deps.ec2.describeInstanceLimits(instance.instanceType) };
  return { kind: 'seen', ...launch.seen };
}

/** Launch-template ENIs (adopt.ts) as a step; undefined when the instance has none of ours. */
async function adoption(
  launch: Launch,
  node: NodeRecord | undefined,
  instance: Ec2Instance,
  limits: InstanceLimits,
): Promise<Step | undefined> {
  const adopted = await adoptTemplateEnis(launch.deps, launch.event, node, instance, limits);
  switch (adopted.kind) {
    case 'none':
      return undefined;
    case 'adopted':
      return { kind: 'next', node: adopted.node };
    case 'refused':
      return { kind: 'failed', node: adopted.node, reason: adopted.reason, again: false };
    case 'wait':
      return adopted;
  }
}

async function planNode(
  launch: Launch,
  node: NodeRecord,
  instance: Ec2Instance,
  limits: InstanceLimits,
): Promise<Step> {
  const { config } = launch.deps;
  const subnets = await candidateSubnets(launch.deps.ec2, config, instance);
  const ipFamily = node.ipFamily ?? config.ipFamily;
  let plan: ReturnType<typeof planLaunch>;
  try {
    plan = planLaunch({
      limits,
      availabilityZone: instance.availabilityZone,
      prefixDelegation: config.prefixDelegation,
      ipFamily,
      minLeases: config.minLeases,
      warmHighLeases: config.warmHighLeases,
      maxPods: config.maxPods,
      subnets,
      existing: instance.interfaces
        .filter((i) => i.attachment)
        .map((i) => ({
          deviceIndex: i.attachment?.deviceIndex ?? 0,
          networkCardIndex: i.attachment?.networkCardIndex ?? 0,
        })),
    });
  } catch (err) {
    if (err instanceof PlanError) return { kind: 'failed', node, reason: `${err.kind}: ${err.message}`, again: false };
    throw err;
  }
  const bySubnet = new Map(subnets.map((s) => [s.subnetId, s]));
  const enis: EniRecord[] = plan.enis.map((p) => {
    const ipv6Cidr = p.ipv6PrefixCount > 0 ? bySubnet.get(p.subnetId)?.ipv6Cidr : undefined;
    return {
      deviceIndex: p.deviceIndex,
      networkCardIndex: p.networkCardIndex,
      subnetId: p.subnetId,
      subnetCidr: bySubnet.get(p.subnetId)?.cidr,
      ...(ipv6Cidr ? { ipv6SubnetCidr: ipv6Cidr } : {}),
      clientToken: eniClientToken(instance.instanceId, p.deviceIndex, p),
      step: 'PLANNED',
      addresses: [],
      prefixes: [],
      plannedIpCount: p.ipCount,
      plannedPrefixCount: p.prefixCount,
      ...(p.ipv6PrefixCount > 0 ? { plannedIpv6PrefixCount: p.ipv6PrefixCount } : {}),
    };
  });
  const inAz = subnets.filter((s) => s.availabilityZone === instance.availabilityZone).map((s) => s.subnetId);
  const planned = await launch.deps.store.updateNode(
    {
      ...node,
      phase: 'PROVISIONING',
      ipFamily,
      enis,
      maxPods: plan.maxPods,
      podSubnetIds: [...new Set(inAz)],
      updatedAtMs: launch.deps.clock.nowMs(),
    },
    node.version,
  );
  launch.log.info('launch planned', {
    enis: planned.enis.map((e) => ({ deviceIndex: e.deviceIndex, subnetId: e.subnetId })),
    maxPods: planned.maxPods,
    ipFamily,
  });
  return { kind: 'next', node: planned };
}

/**
 * The launch's node writer: the write that records the last ENI LEASED also makes the node READY (and clears
 * what it waited on), so a launch ends with one node write instead of two; nothing happens between them.
 */
function readyOnceLeased(deps: LifecycleDeps): EniWriter {
  return (node, changed) => {
    const enis = applyChanges(node.enis, changed);
    const { failureReason: _waitedOn, ...rest } = node;
    const ready = enis.length > 0 && enis.every((e) => e.step === 'LEASED');
    const next: NodeRecord = ready ? { ...rest, phase: 'READY', enis } : { ...node, enis };
    return deps.store.updateNode({ ...next, updatedAtMs: deps.clock.nowMs() }, node.version);
  };
}

/** READY as written by the last lease write, or written now (a resumed launch whose ENIs were all leased). */
async function markReady(deps: LifecycleDeps, node: NodeRecord): Promise<NodeRecord> {
  if (node.phase === 'READY') return node;
  const { failureReason: _waitedOn, ...rest } = node;
  return deps.store.updateNode({ ...rest, phase: 'READY', updatedAtMs: deps.clock.nowMs() }, node.version);
}

/** What an error thrown by a step means: wait for a passing cause, FAILED for one EC2 refuses for good. */
async function errorStep(launch: Launch, err: unknown): Promise<WaitOutcome | Extract<Step, { kind: 'failed' }>> {
  if (err instanceof VersionConflictError || err instanceof NodeNotFoundError)
    return wait('node item changed by a concurrent invocation', 'attaching');
  const deferred = budgetWait(err);
  if (deferred) return deferred;
  if (isEc2Error(err, 'account')) return blockedOnAccount(launch, await launch.deps.store.getNode(launch.arn), err);
  if (isEc2Error(err) && err.retryable) return wait(`EC2 ${err.action}: ${err.code}`);
  if (isEc2Error(err, 'fatal', 'limit'))
    return {
      kind: 'failed',
      node: await launch.deps.store.getNode(launch.arn),
      reason: refusalReason(err),
      again: false,
    };
  throw err;
}

/** The reason recorded when EC2 refuses a request for good (the pod-ENI steps word theirs the same way). */
function refusalReason(err: Ec2ApiError): string {
  return `${err.kind === 'limit' ? 'limits' : 'fatal'}: ${err.action} ${err.code}: ${errorMessage(err.cause ?? err)}`;
}

/**
 * An EC2 error that is not the node's fault: the launch waits, uncharged, and records the cause on a node
 * still provisioning (as failureReason; READY clears it), so `vpc-lease nodes` shows it meanwhile. The record
 * is best effort: the retry goes on either way.
 */
async function blockedOnAccount(launch: Launch, node: NodeRecord | undefined, err: Ec2ApiError): Promise<WaitOutcome> {
  const { deps } = launch;
  const reason = `account: EC2 ${err.action} ${err.code} (retrying; not the node's fault): ${errorMessage(err.cause ?? err)}`;
  if (node && (node.phase === 'PROVISIONING' || node.phase === 'PENDING') && node.failureReason !== reason) {
    try {
      await deps.store.updateNode({ ...node, failureReason: reason, updatedAtMs: deps.clock.nowMs() }, node.version);
    } catch (e) {
      launch.log.warn('could not record why the launch waits', { err: errorMessage(e) });
    }
  }
  return wait(reason, 'backoff', 'account');
}

function ignored(summary: string): Step {
  return { kind: 'ignored', summary };
}
