import type { LifecycleActionRef } from '../autoscaling/port.js';
import type { ControlPlaneConfig } from '../config/control-plane.js';
import type { LifecycleRef, NodeRecord } from '../domain/node.js';
import type { Ec2Instance } from '../ec2/port.js';
import { type StepOutcome, wait } from './deps.js';
import type { LaunchEvent } from './events.js';

/**
 * Launches without a lifecycle hook (Karpenter, EC2 Fleet, plain RunInstances): EC2's state-change event for
 * `pending` or `running` drives the same provisioning as the launch hook. The two states (and a hook event
 * for the same instance) converge on one node item, whose conditional writes serialise the invocations.
 */
export const HOOKLESS_LAUNCH_STATES: readonly string[] = ['pending', 'running'];

/** The tag EKS and Karpenter put on a cluster's instances (value `owned` or `shared`), unless configured. */
export function clusterTagKey(config: { readonly clusterName: string; readonly clusterTagKey?: string }): string {
  return config.clusterTagKey ?? `kubernetes.io/cluster/${config.clusterName}`;
}

/**
 * State-change events carry no tags and come for every instance of the account: only an instance carrying
 * the cluster tag (any value, as the Kubernetes AWS cloud provider reads it) is provisioned.
 */
export function isTaggedForCluster(config: ControlPlaneConfig, instance: Ec2Instance): boolean {
  return instance.tags?.[clusterTagKey(config)] !== undefined;
}

/** The node item's record of the hook, when there is one. */
export function lifecycleRecordOf(lifecycle: LifecycleActionRef | undefined): { lifecycle?: LifecycleRef } {
  if (!lifecycle) return {};
  const { autoScalingGroupName, hookName, token } = lifecycle;
  return { lifecycle: { autoScalingGroupName, hookName, token } };
}

/** Back-offs a fresh hook-less event waits out while another event is provisioning the node. */
const HOOKLESS_DEFERRALS = 2;

/**
 * `running` comes seconds after `pending`, usually while the pending event is still provisioning: joining in at
 * once would repeat its Create/Attach calls against the same token buckets. A hook-less event that finds the
 * node in progress waits a back-off or two first; it then joins in regardless, so a driver that crashed (its
 * redelivery looks the same) is only delayed, never left without one.
 */
export function deferToAnotherEvent(event: LaunchEvent, node: NodeRecord | undefined): StepOutcome | undefined {
  if (event.lifecycle || event.retry.attempt >= HOOKLESS_DEFERRALS) return undefined;
  if (node?.phase !== 'PENDING' && node?.phase !== 'PROVISIONING') return undefined;
  return wait('another event is provisioning this node');
}
