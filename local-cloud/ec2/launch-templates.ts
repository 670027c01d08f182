import type {
  CreateLaunchTemplateRequest,
  InstanceNetworkInterfaceSpecification,
  LaunchTemplateInstanceNetworkInterfaceSpecificationRequest,
  LaunchTemplateSpecification,
  TagSpecification,
} from '@aws-sdk/client-ec2';
import type { LaunchInterfaceSpec, SimLaunchTemplate } from '../ports.js';
import { Ec2ApiError } from './errors.js';
import type { Ec2World } from './world.js';
import { tagsFrom } from './world.js';

type SdkInterface = InstanceNetworkInterfaceSpecification | LaunchTemplateInstanceNetworkInterfaceSpecificationRequest;

/** RunInstances' or a template's NetworkInterfaces → the simulator's launch specs. */
export function launchInterfaceSpecs(list: readonly SdkInterface[] | undefined): LaunchInterfaceSpec[] {
  return (list ?? []).map((n) => {
    if (n.DeviceIndex === undefined)
      throw new Ec2ApiError('MissingParameter', 'Each network interface must specify a DeviceIndex.');
    if (n.NetworkInterfaceId !== undefined)
      // Attaching an existing ENI at launch is not modelled: say so instead of ignoring it.
      throw new Ec2ApiError('InvalidParameterValue', 'NetworkInterfaceId at launch is not supported by the simulator.');
    return {
      deviceIndex: n.DeviceIndex,
      ...(n.NetworkCardIndex !== undefined ? { networkCardIndex: n.NetworkCardIndex } : {}),
      ...(n.SubnetId !== undefined ? { subnetId: n.SubnetId } : {}),
      ...(n.SecondaryPrivateIpAddressCount !== undefined
        ? { secondaryPrivateIpAddressCount: n.SecondaryPrivateIpAddressCount }
        : {}),
      ...(n.Ipv4PrefixCount !== undefined ? { ipv4PrefixCount: n.Ipv4PrefixCount } : {}),
      ...(n.Ipv6AddressCount !== undefined ? { ipv6AddressCount: n.Ipv6AddressCount } : {}),
      ...(n.Ipv6Addresses !== undefined ? { ipv6Addresses: n.Ipv6Addresses.map((a) => a.Ipv6Address ?? '') } : {}),
      ...(n.Ipv6PrefixCount !== undefined ? { ipv6PrefixCount: n.Ipv6PrefixCount } : {}),
      ...(n.Ipv6Prefixes !== undefined ? { ipv6Prefixes: n.Ipv6Prefixes.map((p) => p.Ipv6Prefix ?? '') } : {}),
      ...(n.Groups !== undefined ? { groupIds: [...n.Groups] } : {}),
      ...(n.DeleteOnTermination !== undefined ? { deleteOnTermination: n.DeleteOnTermination } : {}),
      ...(n.AssociatePublicIpAddress !== undefined ? { associatePublicIpAddress: n.AssociatePublicIpAddress } : {}),
      ...(n.Description !== undefined ? { description: n.Description } : {}),
    };
  });
}

/** The tags of TagSpecifications entries of one resource type. */
export function tagsOfType(
  specs: readonly { ResourceType?: string | undefined; Tags?: TagSpecification['Tags'] }[] | undefined,
  resourceType: string,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const spec of specs ?? []) {
    if (spec.ResourceType !== resourceType) continue;
    for (const [k, v] of tagsFrom(spec.Tags)) out[k] = v;
  }
  return out;
}

/** CreateLaunchTemplate: one version (1, also $Default and $Latest) holding what a launch uses. */
export function createLaunchTemplate(world: Ec2World, input: CreateLaunchTemplateRequest): SimLaunchTemplate {
  const name = input.LaunchTemplateName;
  if (!name) throw new Ec2ApiError('MissingParameter', 'The request must contain the parameter LaunchTemplateName');
  if ([...world.launchTemplates.values()].some((t) => t.launchTemplateName === name))
    throw new Ec2ApiError(
      'InvalidLaunchTemplateName.AlreadyExistsException',
      `Launch template name already in use: ${name}`,
    );
  const data = input.LaunchTemplateData ?? {};
  const template: SimLaunchTemplate = {
    launchTemplateId: world.random.id('lt'),
    launchTemplateName: name,
    ...(data.InstanceType !== undefined ? { instanceType: data.InstanceType } : {}),
    networkInterfaces: launchInterfaceSpecs(data.NetworkInterfaces),
    networkInterfaceTags: tagsOfType(data.TagSpecifications, 'network-interface'),
  };
  world.launchTemplates.set(template.launchTemplateId, template);
  return template;
}

/** A template by id or name; only version 1 exists. */
export function findLaunchTemplate(
  world: Ec2World,
  spec: { readonly id?: string | undefined; readonly name?: string | undefined; readonly version?: string | undefined },
): SimLaunchTemplate | undefined {
  if (spec.version !== undefined && !['1', '$Default', '$Latest'].includes(spec.version)) return undefined;
  if (spec.id !== undefined) return world.launchTemplates.get(spec.id);
  return [...world.launchTemplates.values()].find((t) => t.launchTemplateName === spec.name);
}

/** RunInstances' LaunchTemplate parameter: unknown → the error EC2 gives. */
export function requireLaunchTemplate(world: Ec2World, spec: LaunchTemplateSpecification): SimLaunchTemplate {
  const found = findLaunchTemplate(world, {
    id: spec.LaunchTemplateId,
    name: spec.LaunchTemplateName,
    version: spec.Version,
  });
  if (!found)
    throw new Ec2ApiError(
      'InvalidLaunchTemplateId.NotFound',
      `The specified launch template, with template ID ${spec.LaunchTemplateId ?? spec.LaunchTemplateName}, does not exist.`,
    );
  return found;
}
