import type { NodeRecord } from '../domain/node.js';
import type { Ec2Instance } from '../ec2/port.js';
import { NodeNotFoundError } from '../errors.js';
import { METRIC_NAMES } from '../metrics.js';
import { abandonLaunch } from './abandon.js';
import { done, type LifecycleDeps, type StepOutcome, wait } from './deps.js';
import type { LaunchEvent } from './events.js';
import { expectedLeases } from './pod-eni.js';
import { advancePodEnis } from './pod-eni-steps.js';

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
  const outcome = await advancePodEnis(deps, start, instance, { minLeases: deps.config.minLeases });
  switch (outcome.kind) {
    case 'done':
      return complete(deps, event, outcome.node);
    case 'wait':
      return wait(outcome.reason, outcome.delay);
    case 'refused':
      return abandonLaunch(deps, event, outcome.node, outcome.reason);
    case 'gone':
      // The strict writer throws on a concurrent change; "gone" means the item itself went away.
      throw new NodeNotFoundError(start.instanceArn);
  }
}

async function complete(deps: LifecycleDeps, event: LaunchEvent, node: NodeRecord): Promise<StepOutcome> {
  const pending = node.enis.filter((e) => e.step !== 'LEASED');
  if (pending.length > 0) return wait(`ENIs not leased yet: ${pending.map((e) => e.deviceIndex).join(', ')}`);
  const ready = await deps.store.updateNode({ ...node, phase: 'READY', updatedAtMs: deps.clock.nowMs() }, node.version);
  deps.metrics?.add(METRIC_NAMES.launchCompleted, {});
  const outcome = await deps.autoScaling.completeLifecycleAction(event.lifecycle, 'CONTINUE');
  const leases = expectedLeases(ready, deps.config.maxPods).length;
  return done(`node READY with ${ready.enis.length} pod ENI(s) and ${leases} lease(s); lifecycle ${outcome}`);
}
