import type { LaunchRequest, SimInstanceState } from '../ports.js';
import { attachEni, removeEni } from './enis.js';
import { Ec2ApiError } from './errors.js';
import {
  createLaunchEnis,
  type LaunchInterfaces,
  type ResolvedInterface,
  resolveLaunchInterfaces,
} from './launch-interfaces.js';
import type { EniRecord, InstanceRecord } from './model.js';
import type { Ec2World } from './world.js';

/**
 * Instance lifecycle. RunInstances and the Auto Scaling simulator both come through `launchInstance`, so an
 * instance always has its boot ENI at device index 0 and the launch's other ENIs (RunInstances or launch
 * template NetworkInterfaces), all attached at once as EC2 reports them during `pending`, and moves
 * pending → running after the configured delay.
 */
export function launchInstance(
  world: Ec2World,
  request: LaunchRequest & { readonly reservationId?: string },
  resolved?: LaunchInterfaces,
): InstanceRecord {
  const launch = resolved ?? resolveLaunchInterfaces(world, world.limitsOf(request.instanceType), request);
  const enis = createLaunchEnis(world, launch, request.networkInterfaceTags ?? {});
  const boot = enis[0] as EniRecord;
  const bootSpec = launch.interfaces[0] as ResolvedInterface;
  const instance: InstanceRecord = {
    instanceId: world.random.id('i'),
    reservationId: request.reservationId ?? world.random.id('r'),
    instanceType: request.instanceType,
    state: 'pending',
    subnetId: boot.subnetId,
    vpcId: boot.vpcId,
    availabilityZone: boot.availabilityZone,
    imageId: request.imageId ?? 'ami-0123456789abcdef0',
    privateIp: boot.privateIps[0] as string,
    bootEniId: boot.eniId,
    groupIds: [...bootSpec.groupIds],
    launchTimeMs: world.timeline.nowMs(),
    tags: new Map(Object.entries(request.tags ?? {})),
    visibleAtMs: world.visibleAt(),
    stateReason: undefined,
    ...(launch.publicIp ? { publicIp: world.nextPublicIp() } : {}),
  };
  world.instances.set(instance.instanceId, instance);
  for (const [i, spec] of launch.interfaces.entries()) {
    attachEni(world, {
      eniId: (enis[i] as EniRecord).eniId,
      instanceId: instance.instanceId,
      deviceIndex: spec.deviceIndex,
      networkCardIndex: spec.networkCardIndex,
      atLaunch: true,
      deleteOnTermination: spec.deleteOnTermination,
    });
  }
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
