import { instanceArn } from '../domain/arn.js';
import type { NodeRecord } from '../domain/node.js';
import { VersionConflictError } from '../errors.js';
import { METRIC_NAMES } from '../metrics.js';
import { budgetWait } from './budget-wait.js';
import { done, type LifecycleDeps, type StepOutcome, wait } from './deps.js';
import { sweepInstanceEnis } from './eni-sweep.js';
import type { StateChangeEvent, TerminateEvent } from './events.js';

/**
 * The terminate hook, and EC2's `terminated` state change for instances without one:
 *
 *   node → DRAINING → pod ENIs swept (DeleteOnTermination set on attached ones, unattached ones deleted) →
 *   leases and node item removed → node item re-written as GONE → lifecycle action completed (CONTINUE).
 *
 * The GONE item stays as an audit trail (type, AZ, ENIs, failure reason, timestamps) — the leases do not, so
 * nothing can be claimed on a gone node; the reconciler prunes GONE items after its retention time.
 * An event for an unknown or already GONE instance only sweeps leftover ENIs and completes the hook (and, for
 * a terminate hook, leaves a GONE tombstone).
 */
export async function runTerminate(
  deps: LifecycleDeps,
  event: TerminateEvent | StateChangeEvent,
): Promise<StepOutcome> {
  try {
    return await terminateSteps(deps, event);
  } catch (err) {
    // A busy account defers the sweep: re-enqueued for its token with a heartbeat, like a launch, rather than
    // failing the record and spending SQS receives until a large scale-in reaches the DLQ.
    const deferred = budgetWait(err);
    if (deferred) return deferred;
    throw err;
  }
}

async function terminateSteps(deps: LifecycleDeps, event: TerminateEvent | StateChangeEvent): Promise<StepOutcome> {
  if (event.kind === 'state-change' && event.state !== 'terminated')
    return done(`state ${event.state} needs nothing from vpc-lease`);
  const arn = instanceArn(event.region, event.accountId, event.instanceId, event.partition);
  const log = deps.logger.child({ instanceId: event.instanceId, flow: event.kind });
  const node = await drain(deps, arn);

  const swept = await sweepInstanceEnis(deps, event.instanceId);
  if (swept.deleted.length + swept.markedDeleteOnTermination.length > 0) log.info('pod ENIs swept', { ...swept });
  if (swept.pending.length > 0) return wait(`ENIs still detaching: ${swept.pending.join(', ')}`, 'attaching');

  if (node && node.phase !== 'GONE') {
    const removed = await deps.store.deleteNodePartition(arn);
    const gone: NodeRecord = {
      ...node,
      phase: 'GONE',
      enis: node.enis.map((e) => ({ ...e, step: 'DELETING' as const })),
      updatedAtMs: deps.clock.nowMs(),
      version: 1,
    };
    await deps.store.createNode(gone);
    deps.metrics?.add(METRIC_NAMES.nodeGone, {});
    log.info('node gone', { itemsRemoved: removed });
  }
  if (!node && event.kind === 'terminate') {
    // Events travel through a standard queue, so a launch event can arrive after its terminate event. A GONE
    // tombstone makes that late launch a no-op; without it, the still-running instance would get ENIs and
    // leases that nothing would ever remove.
    await deps.store.createNode(tombstone(arn, event.instanceId, deps.clock.nowMs()));
  }
  if (event.kind === 'terminate') {
    const outcome = await deps.autoScaling.completeLifecycleAction(event.lifecycle, 'CONTINUE');
    return done(`terminate handled (${node ? 'node GONE' : 'unknown instance'}); lifecycle ${outcome}`);
  }
  return done(node ? 'node GONE' : 'unknown instance; leftover ENIs swept');
}

/**
 * Marks the node DRAINING, winning against a launch still writing progress: on a version conflict it re-reads
 * and tries again, and the launch's own next write then conflicts, re-reads DRAINING and stops.
 */
async function drain(deps: LifecycleDeps, arn: string): Promise<NodeRecord | undefined> {
  for (let attempt = 0; ; attempt += 1) {
    const node = await deps.store.getNode(arn);
    if (!node || node.phase === 'GONE' || node.phase === 'DRAINING') return node;
    try {
      return await deps.store.updateNode({ ...node, phase: 'DRAINING', updatedAtMs: deps.clock.nowMs() }, node.version);
    } catch (err) {
      if (!(err instanceof VersionConflictError) || attempt >= 8) throw err;
    }
  }
}

function tombstone(arn: string, instanceId: string, nowMs: number): NodeRecord {
  return {
    instanceArn: arn,
    instanceId,
    instanceType: 'unknown',
    availabilityZone: 'unknown',
    podSubnetIds: [],
    phase: 'GONE',
    failureReason: 'terminated before its launch was handled',
    enis: [],
    maxPods: 0,
    createdAtMs: nowMs,
    updatedAtMs: nowMs,
    version: 1,
  };
}
