import type { Ec2SimulatorApi } from '../ports.js';
import type { Group, GroupInstance, LaunchTemplateSpec } from './model.js';

/** What Auto Scaling launches instances from: the EC2 simulator, and what decides a template's type. */
export interface InstanceSource {
  readonly ec2: Ec2SimulatorApi;
  /** Instance type of a launch template the simulator cannot look up (EC2 launch templates are not modelled). */
  readonly resolveInstanceType?: (template: LaunchTemplateSpec) => string | undefined;
  readonly defaultInstanceType?: string;
}

/**
 * The EC2 side of a group's launch, as Auto Scaling makes it: RunInstances with the group's type (else the
 * template's), the tags that propagate at launch plus `aws:autoscaling:groupName`, and the template's
 * NetworkInterfaces; returns the group's record of the new instance (Pending, not yet in the group). Throws
 * what EC2 answered, for the caller's failed activity and retry.
 */
export function launchGroupInstance(
  source: InstanceSource,
  group: Group,
  subnetId: string,
  nowMs: number,
): GroupInstance {
  // A template the EC2 simulator holds brings its NetworkInterfaces (pod ENIs created at launch) and tags.
  const template = group.launchTemplate
    ? source.ec2.launchTemplate({
        ...(group.launchTemplate.LaunchTemplateId ? { id: group.launchTemplate.LaunchTemplateId } : {}),
        ...(group.launchTemplate.LaunchTemplateName ? { name: group.launchTemplate.LaunchTemplateName } : {}),
      })
    : undefined;
  const instanceType =
    group.instanceTypes[0] ??
    template?.instanceType ??
    (group.launchTemplate ? source.resolveInstanceType?.(group.launchTemplate) : undefined) ??
    source.defaultInstanceType ??
    'm5.large';
  const tags: Record<string, string> = { 'aws:autoscaling:groupName': group.name };
  for (const tag of group.tags.values()) if (tag.PropagateAtLaunch) tags[tag.Key] = tag.Value;
  const launched = source.ec2.launchInstance({
    instanceType,
    subnetId,
    tags,
    // Auto Scaling picks the subnet: a template ENI that names none goes into it, the boot ENI always does.
    ...(template
      ? {
          networkInterfaces: template.networkInterfaces.map((n) => {
            if (n.deviceIndex !== 0) return n;
            const { subnetId: _groupPicksIt, ...boot } = n;
            return boot;
          }),
          networkInterfaceTags: template.networkInterfaceTags,
        }
      : {}),
  });
  return {
    instanceId: launched.instanceId,
    instanceType: launched.instanceType,
    availabilityZone: launched.availabilityZone,
    subnetId,
    launchedMs: nowMs,
    lifecycleState: 'Pending',
    healthStatus: 'Healthy',
    protectedFromScaleIn: group.newInstancesProtectedFromScaleIn,
    ec2Running: launched.state === 'running',
    actions: new Map(),
  };
}
