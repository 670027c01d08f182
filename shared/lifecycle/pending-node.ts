import type { InstanceLimits } from '../domain/limits.js';
import type { NodeRecord } from '../domain/node.js';
import type { Ec2Instance } from '../ec2/port.js';
import type { LifecycleDeps } from './deps.js';
import type { LaunchEvent } from './events.js';
import { lifecycleRecordOf } from './hookless.js';

/** A launch's first node item, before any pod ENI is planned or adopted (not written: the caller does). */
export function pendingNodeRecord(
  deps: Pick<LifecycleDeps, 'clock' | 'config'>,
  event: LaunchEvent,
  arn: string,
  instance: Ec2Instance,
  limits: InstanceLimits,
): NodeRecord {
  const nowMs = deps.clock.nowMs();
  return {
    instanceArn: arn,
    instanceId: instance.instanceId,
    instanceType: instance.instanceType,
    availabilityZone: instance.availabilityZone,
    ...lifecycleRecordOf(event.lifecycle),
    limits,
    podSubnetIds: [],
    phase: 'PENDING',
    // Fixed at the first write: the plan, the leases and the node's ADD all go by the node's own figure.
    ipFamily: deps.config.ipFamily,
    enis: [],
    maxPods: 0,
    createdAtMs: nowMs,
    updatedAtMs: nowMs,
    version: 1,
  };
}
