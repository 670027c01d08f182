import { instanceArn } from '../domain/arn.js';
import type { NodeRecord } from '../domain/node.js';
import { METRIC_DIMENSIONS, METRIC_NAMES } from '../metrics.js';
import type { LifecycleDeps } from './deps.js';
import { sweepInstanceEnis } from './eni-sweep.js';
import type { LaunchEvent } from './events.js';
import { lifecycleRecordOf } from './hookless.js';

/**
 * A launch given up for an unrecoverable cause (invalid configuration, every candidate subnet exhausted,
 * instance limits, retries exhausted): logs it, records it on the node item (FAILED + reason) and leaves no
 * ENI or lease behind. The launch's finishing point (launch.ts) then ABANDONs the lifecycle action, so Auto
 * Scaling replaces the instance at once instead of waiting for the hook to time out.
 *
 * Without a hook there is nothing to ABANDON and the instance is left running: its owner (Karpenter, a fleet,
 * whoever called RunInstances) decides its fate, and vpc-lease holds no right to terminate instances. The
 * node's STATUS keeps it NotReady with the reason; the metric raises the same alarm.
 */
export async function failNode(
  deps: LifecycleDeps,
  event: LaunchEvent,
  node: NodeRecord | undefined,
  reason: string,
): Promise<void> {
  const log = deps.logger.child({ instanceId: event.instanceId, flow: 'launch' });
  log.error('abandoning launch', { reason });
  deps.metrics?.add(METRIC_NAMES.launchAbandoned, {
    [METRIC_DIMENSIONS.cluster]: deps.config.clusterName,
    [METRIC_DIMENSIONS.reason]: reason.split(':')[0] ?? 'unknown',
  });
  try {
    const swept = await sweepInstanceEnis(deps, event.instanceId);
    log.info('pod ENIs of the abandoned instance cleaned up', { ...swept });
  } catch (err) {
    // The instance is terminated after ABANDON; DeleteOnTermination or the reconciler removes what is left.
    log.warn('cleanup of pod ENIs failed; leaving them to the reconciler', { err });
  }
  const arn = instanceArn(event.region, event.accountId, event.instanceId, event.partition);
  const nowMs = deps.clock.nowMs();
  const failed: NodeRecord = {
    ...(node ?? {
      instanceArn: arn,
      instanceId: event.instanceId,
      instanceType: 'unknown',
      availabilityZone: 'unknown',
      podSubnetIds: [],
      enis: [],
      maxPods: 0,
      createdAtMs: nowMs,
      version: 1,
    }),
    ...lifecycleRecordOf(event.lifecycle),
    phase: 'FAILED',
    failureReason: reason,
    updatedAtMs: nowMs,
  };
  if (!node) {
    if (!(await deps.store.createNode(failed))) {
      // A concurrent invocation created the item meanwhile: abandon on top of what it recorded.
      const current = await deps.store.getNode(arn);
      if (current && current.phase !== 'FAILED') return failNode(deps, event, current, reason);
    }
  } else if (node.enis.some((e) => e.step === 'ATTACHED' || e.step === 'LEASED')) {
    // Leases may exist: the port removes them only with the whole partition, so the FAILED item is rewritten.
    await deps.store.deleteNodePartition(arn);
    await deps.store.createNode({ ...failed, version: 1 });
  } else {
    await deps.store.updateNode(failed, node.version);
  }
}
