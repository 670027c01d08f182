import type { NodeRecord } from '../domain/node.js';
import { type Ec2ApiError, isEc2Error } from '../ec2/errors.js';
import type { Ec2Instance } from '../ec2/port.js';
import { declareEc2Calls } from '../ec2/rate-budget.js';
import { errorMessage, NodeNotFoundError } from '../errors.js';
import { METRIC_NAMES } from '../metrics.js';
import { leaseCapFor } from '../planner/max-pods.js';
import { abandonLaunch } from './abandon.js';
import { budgetWait } from './budget-wait.js';
import { done, type LifecycleDeps, type StepOutcome, wait } from './deps.js';
import type { LaunchEvent } from './events.js';
import { completeLaunchAction } from './hookless.js';
import { expectedLeases } from './pod-eni.js';
import { applyChanges, type EniWriter } from './pod-eni-outcome.js';
import { advancePodEnis, podEniCallsAhead } from './pod-eni-steps.js';

/**
 * The launch's use of the pod-ENI steps (pod-eni-steps.ts) on a PROVISIONING node: it never waits inside the
 * invocation (an attachment in progress re-enqueues the event), abandons on what EC2 refuses for good or
 * when the subnets cannot hold the minimum pool, and completes the lifecycle action once every ENI is leased.
 */
export async function advanceEnis(
  deps: LifecycleDeps,
  event: LaunchEvent,
  start: NodeRecord,
  instance: Ec2Instance | undefined,
): Promise<StepOutcome> {
  const waitMs = deps.attachWaitMs ?? 0;
  // Its remaining creates and attaches reserved at once: a launch deferred for tokens keeps its turn (rate-budget.ts).
  declareEc2Calls(podEniCallsAhead(start.enis));
  const outcome = await advancePodEnis(deps, start, instance, {
    minLeases: deps.config.minLeases,
    write: readyOnceLeased(deps),
    // A first look after waitMs (EC2 takes seconds to attach), one more after another waitMs if still attaching.
    ...(waitMs > 0
      ? { attachPolls: 2, sleepBeforeFirstLook: true, sleep: () => new Promise<void>((r) => setTimeout(r, waitMs)) }
      : {}),
  });
  switch (outcome.kind) {
    case 'done':
      return complete(deps, event, outcome.node);
    case 'wait': {
      const deferred = budgetWait(...outcome.failures.map((f) => f.err));
      if (deferred) return deferred;
      const blocked = outcome.failures.map((f) => f.err).find((e) => isEc2Error(e, 'account'));
      if (!blocked) return wait(outcome.reason, outcome.delay);
      const reason = accountReason(blocked);
      await noteBlocked(deps, outcome.node, reason);
      return wait(reason, 'backoff', 'account');
    }
    case 'refused':
      return abandonLaunch(deps, event, outcome.node, outcome.reason);
    case 'gone':
      // The strict writer throws on a concurrent change; "gone" means the item itself went away.
      throw new NodeNotFoundError(start.instanceArn);
  }
}

/** The reason shown for an error that is not the node's fault: `vpc-lease nodes` and `dlq` print it. */
export function accountReason(err: Ec2ApiError): string {
  return `account: EC2 ${err.action} ${err.code} (retrying; not the node's fault): ${errorMessage(err.cause ?? err)}`;
}

/**
 * Records on a PROVISIONING node what it waits on (as failureReason; READY clears it), so an operator sees the
 * cause with `vpc-lease nodes` while the launch retries. Best effort: the retry goes on either way.
 */
export async function noteBlocked(deps: LifecycleDeps, node: NodeRecord | undefined, reason: string): Promise<void> {
  if (!node || (node.phase !== 'PROVISIONING' && node.phase !== 'PENDING') || node.failureReason === reason) return;
  try {
    await deps.store.updateNode({ ...node, failureReason: reason, updatedAtMs: deps.clock.nowMs() }, node.version);
  } catch (err) {
    deps.logger.warn('could not record why the launch waits', { instanceId: node.instanceId, err: errorMessage(err) });
  }
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

async function complete(deps: LifecycleDeps, event: LaunchEvent, node: NodeRecord): Promise<StepOutcome> {
  const pending = node.enis.filter((e) => e.step !== 'LEASED');
  if (pending.length > 0) return wait(`ENIs not leased yet: ${pending.map((e) => e.deviceIndex).join(', ')}`);
  const { failureReason: _waitedOn, ...rest } = node;
  const ready =
    node.phase === 'READY'
      ? node
      : await deps.store.updateNode({ ...rest, phase: 'READY', updatedAtMs: deps.clock.nowMs() }, node.version);
  deps.metrics?.add(METRIC_NAMES.launchCompleted, {});
  const outcome = await completeLaunchAction(deps, event.lifecycle, 'CONTINUE');
  const leases = expectedLeases(ready, leaseCapFor(ready.maxPods, deps.config.maxPods)).length;
  return done(`node READY with ${ready.enis.length} pod ENI(s) and ${leases} lease(s); lifecycle ${outcome}`);
}
