import type { LaunchRequest, SimInstanceState } from '../ports.js';
import { attachEni, createEni, removeEni } from './enis.js';
import { Ec2ApiError } from './errors.js';
import type { InstanceRecord } from './model.js';
import type { Ec2World } from './world.js';

/**
 * Instance lifecycle. RunInstances and the Auto Scaling simulator both come through `launchInstance`, so an
 * instance always has its boot ENI at device index 0 (DeleteOnTermination, attached at once, as EC2 reports it
 * during `pending`), and moves pending → running after the configured delay.
 */
export function launchInstance(
  world: Ec2World,
  request: LaunchRequest & { readonly reservationId?: string },
): InstanceRecord {
  world.limitsOf(request.instanceType);
  const subnet = world.subnet(request.subnetId);
  const groupIds = [...(request.securityGroupIds ?? [])];
  world.checkGroups(groupIds, subnet.vpcId);
  const eni = createEni(world, {
    subnetId: subnet.subnetId,
    description: 'Primary network interface',
    groupIds,
  });
  const instance: InstanceRecord = {
    instanceId: world.random.id('i'),
    reservationId: request.reservationId ?? world.random.id('r'),
    instanceType: request.instanceType,
    state: 'pending',
    subnetId: subnet.subnetId,
    vpcId: subnet.vpcId,
    availabilityZone: subnet.availabilityZone,
    imageId: request.imageId ?? 'ami-0123456789abcdef0',
    privateIp: eni.privateIps[0] as string,
    bootEniId: eni.eniId,
    groupIds,
    launchTimeMs: world.timeline.nowMs(),
    tags: new Map(Object.entries(request.tags ?? {})),
    visibleAtMs: world.visibleAt(),
    stateReason: undefined,
  };
  world.instances.set(instance.instanceId, instance);
  attachEni(world, { eniId: eni.eniId, instanceId: instance.instanceId, deviceIndex: 0, atLaunch: true });
  world.setInstanceState(instance, 'pending', true);
  world.timeline.after(world.config.delays.instancePendingMs, () => {
    if (instance.state === 'pending') world.setInstanceState(instance, 'running');
  });
  return instance;
}

export interface StateChange {
  readonly instanceId: string;
  readonly previous: SimInstanceState;
  readonly current: SimInstanceState;
}

/**
 * shutting-down now; after the shutdown delay: terminated, ENIs marked DeleteOnTermination deleted (their
 * addresses back in the subnet) and the others detached and left `available`.
 */
export function terminateInstance(world: Ec2World, instanceId: string): StateChange {
  const instance = world.instance(instanceId);
  const previous = instance.state;
  if (previous === 'terminated' || previous === 'shutting-down') {
    return { instanceId, previous, current: previous };
  }
  world.setInstanceState(instance, 'shutting-down');
  instance.stateReason = 'Client.UserInitiatedShutdown';
  world.timeline.after(world.config.delays.instanceShutdownMs, () => finishTermination(world, instance));
  return { instanceId, previous, current: 'shutting-down' };
}

function finishTermination(world: Ec2World, instance: InstanceRecord): void {
  for (const eni of [...world.enis.values()]) {
    const attachment = eni.attachment;
    if (attachment?.instanceId !== instance.instanceId) continue;
    if (attachment.deleteOnTermination) removeEni(world, eni);
    else eni.attachment = undefined;
  }
  world.setInstanceState(instance, 'terminated');
}

export function checkLaunchable(world: Ec2World, instanceType: string | undefined): string {
  if (!instanceType) throw new Ec2ApiError('MissingParameter', 'The request must contain the parameter InstanceType');
  world.limitsOf(instanceType);
  return instanceType;
}
