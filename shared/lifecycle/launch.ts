import { instanceArn } from '../domain/arn.js';
import { isInstanceProvisionable } from '../domain/instance-states.js';
import type { InstanceLimits } from '../domain/limits.js';
import type { EniRecord, NodeRecord } from '../domain/node.js';
import { type Ec2ApiError, isEc2Error } from '../ec2/errors.js';
import type { Ec2Instance } from '../ec2/port.js';
import { eniClientToken } from '../ec2/tags.js';
import { errorMessage, NodeNotFoundError, VersionConflictError } from '../errors.js';
import { PlanError } from '../planner/errors.js';
import { planLaunch } from '../planner/launch-plan.js';
import { abandonLaunch } from './abandon.js';
import { adoptTemplateEnis } from './adopt.js';
import { budgetWait } from './budget-wait.js';
import { done, type LifecycleDeps, type StepOutcome, wait } from './deps.js';
import type { LaunchEvent } from './events.js';
import { clusterTagKey, completeLaunchAction, deferToAnotherEvent, isTaggedForCluster } from './hookless.js';
import { accountReason, advanceEnis, noteBlocked } from './launch-steps.js';
import { pendingNodeRecord } from './pending-node.js';
import { candidateSubnets } from './subnets.js';

/**
 * The launch hook, resumable: every step's result is written to the node item before the next EC2 call, so
 * whatever invocation picks the event up next (a duplicate, a redelivery after a crash, a re-enqueued retry)
 * continues from the recorded step — and a step that ran but was not recorded is repeated harmlessly
 * (ClientToken for creates, attachment read-back for attaches, idempotent modifies and lease puts).
 *
 *   (no item) → PENDING → PROVISIONING (ENIs PLANNED → CREATED → ATTACHING → ATTACHED → LEASED) → READY
 *                                  └──────────── FAILED (reason; lifecycle action ABANDONed)
 */
export async function runLaunch(deps: LifecycleDeps, event: LaunchEvent): Promise<StepOutcome> {
  const arn = instanceArn(event.region, event.accountId, event.instanceId, event.partition);
  const log = deps.logger.child({ instanceId: event.instanceId, flow: 'launch', attempt: event.retry.attempt });
  try {
    let node = await deps.store.getNode(arn);
    const settled = node ? await settledLaunch(deps, event, node) : undefined;
    if (settled) return settled;
    const deferred = deferToAnotherEvent(event, node);
    if (deferred) return deferred;

    // A resumed launch whose ENIs all exist needs nothing from DescribeInstances (attach and verify go by id):
    // skipping it saves a round trip per re-enqueued attempt.
    if (node?.phase === 'PROVISIONING' && !node.enis.some((e) => e.step === 'PLANNED'))
      return await advanceEnis(deps, event, node, undefined);

    const instance = await deps.ec2.describeInstance(event.instanceId);
    if (!instance) return wait('instance not visible in EC2 yet');
    if (!isInstanceProvisionable(instance.state)) return done(`instance is ${instance.state}; nothing to provision`);
    if (!node && !event.lifecycle && !isTaggedForCluster(deps.config, instance))
      return done(`no hook and no ${clusterTagKey(deps.config)} tag: not a node of this cluster`);
    const limits = await deps.ec2.describeInstanceLimits(instance.instanceType);

    if (!node) {
      // Template ENIs: the node item is first written already PROVISIONING (adopt.ts), not PENDING and then again.
      const adopted = await adoptTemplateEnis(deps, event, undefined, instance, limits);
      if (adopted) return adopted;
      node = await createPendingNode(deps, event, arn, instance, limits);
      const again = await settledLaunch(deps, event, node);
      if (again) return again;
    }
    if (node.phase === 'PENDING') {
      const adopted = await adoptTemplateEnis(deps, event, node, instance, limits);
      if (adopted) return adopted;
      const planned = await planNode(deps, event, node, instance, limits);
      if ('kind' in planned) return planned;
      node = planned;
      log.info('launch planned', {
        enis: node.enis.map((e) => ({ deviceIndex: e.deviceIndex, subnetId: e.subnetId })),
        maxPods: node.maxPods,
      });
    }
    return await advanceEnis(deps, event, node, instance);
  } catch (err) {
    if (err instanceof VersionConflictError || err instanceof NodeNotFoundError)
      return wait('node item changed by a concurrent invocation', 'attaching');
    const deferred = budgetWait(err);
    if (deferred) return deferred;
    if (isEc2Error(err, 'account')) {
      const reason = accountReason(err);
      await noteBlocked(deps, await deps.store.getNode(arn), reason);
      return wait(reason, 'backoff', 'account');
    }
    if (isEc2Error(err) && err.retryable) return wait(`EC2 ${err.action}: ${err.code}`);
    if (isEc2Error(err, 'fatal', 'limit')) return abandonFromError(deps, event, arn, err);
    throw err;
  }
}

/** A node already past provisioning: repeat the last externally visible act (idempotent), or nothing. */
async function settledLaunch(
  deps: LifecycleDeps,
  event: LaunchEvent,
  node: NodeRecord,
): Promise<StepOutcome | undefined> {
  switch (node.phase) {
    case 'READY': {
      // The crash window between writing READY and completing: complete again ('gone' when it was done).
      const outcome = await completeLaunchAction(deps, event.lifecycle, 'CONTINUE');
      return done(`node already READY; lifecycle action ${outcome === 'done' ? 'completed' : `was ${outcome}`}`);
    }
    case 'FAILED': {
      await completeLaunchAction(deps, event.lifecycle, 'ABANDON');
      return done(`node already FAILED: ${node.failureReason ?? 'no reason recorded'}`);
    }
    case 'DRAINING':
    case 'GONE':
      return done(`node is ${node.phase}; a late launch event changes nothing`);
    default:
      return undefined;
  }
}

async function createPendingNode(
  deps: LifecycleDeps,
  event: LaunchEvent,
  arn: string,
  instance: Ec2Instance,
  limits: InstanceLimits,
): Promise<NodeRecord> {
  const fresh = pendingNodeRecord(deps, event, arn, instance, limits);
  // What was written is what a read would return: no read-back.
  if (await deps.store.createNode(fresh)) return fresh;
  // A duplicate event created it first: carry on from whatever it recorded.
  const existing = await deps.store.getNode(arn);
  if (!existing) throw new VersionConflictError(arn, 0);
  return existing;
}

async function planNode(
  deps: LifecycleDeps,
  event: LaunchEvent,
  node: NodeRecord,
  instance: Ec2Instance,
  limits: InstanceLimits,
): Promise<NodeRecord | StepOutcome> {
  const { config } = deps;
  const subnets = await candidateSubnets(deps.ec2, config, instance);
  let plan: ReturnType<typeof planLaunch>;
  try {
    plan = planLaunch({
      limits,
      availabilityZone: instance.availabilityZone,
      prefixDelegation: config.prefixDelegation,
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
    if (err instanceof PlanError) return abandonLaunch(deps, event, node, `${err.kind}: ${err.message}`);
    throw err;
  }
  const cidrs = new Map(subnets.map((s) => [s.subnetId, s.cidr]));
  const enis: EniRecord[] = plan.enis.map((p) => ({
    deviceIndex: p.deviceIndex,
    networkCardIndex: p.networkCardIndex,
    subnetId: p.subnetId,
    subnetCidr: cidrs.get(p.subnetId),
    clientToken: eniClientToken(instance.instanceId, p.deviceIndex, p),
    step: 'PLANNED',
    addresses: [],
    prefixes: [],
    plannedIpCount: p.ipCount,
    plannedPrefixCount: p.prefixCount,
  }));
  const inAz = subnets.filter((s) => s.availabilityZone === instance.availabilityZone).map((s) => s.subnetId);
  return deps.store.updateNode(
    {
      ...node,
      phase: 'PROVISIONING',
      enis,
      maxPods: plan.maxPods,
      podSubnetIds: [...new Set(inAz)],
      updatedAtMs: deps.clock.nowMs(),
    },
    node.version,
  );
}

async function abandonFromError(
  deps: LifecycleDeps,
  event: LaunchEvent,
  arn: string,
  err: Ec2ApiError,
): Promise<StepOutcome> {
  const node = await deps.store.getNode(arn);
  const reason = `${err.kind === 'limit' ? 'limits' : 'fatal'}: ${err.action} ${err.code}: ${errorMessage(err.cause ?? err)}`;
  return abandonLaunch(deps, event, node, reason);
}
