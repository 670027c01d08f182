import type {
  AssignIpv6AddressesRequest,
  AssignPrivateIpAddressesRequest,
  AttachNetworkInterfaceRequest,
  CreateLaunchTemplateRequest,
  CreateNetworkInterfaceRequest,
  CreateSecurityGroupRequest,
  CreateSubnetRequest,
  CreateTagsRequest,
  CreateVpcRequest,
  DeleteNetworkInterfaceRequest,
  DeleteTagsRequest,
  DetachNetworkInterfaceRequest,
  ModifyNetworkInterfaceAttributeRequest,
  ModifySubnetAttributeRequest,
  RunInstancesRequest,
  TagSpecification,
  TerminateInstancesRequest,
  UnassignIpv6AddressesRequest,
  UnassignPrivateIpAddressesRequest,
} from '@aws-sdk/client-ec2';
import type { LaunchRequest } from '../ports.js';
import { DESCRIBE_HANDLERS } from './describe-actions.js';
import {
  assignAddresses,
  attachEni,
  createEni,
  deleteEni,
  detachEni,
  findAttachment,
  unassignAddresses,
} from './enis.js';
import { Ec2ApiError, notFound } from './errors.js';
import type { ClientTokens } from './idempotency.js';
import { launchInstance, terminateInstance } from './instances.js';
import { assignIpv6, unassignIpv6 } from './ipv6-enis.js';
import { addressesPerLaunch, resolveLaunchInterfaces } from './launch-interfaces.js';
import { createLaunchTemplate, launchInterfaceSpecs, requireLaunchTemplate, tagsOfType } from './launch-templates.js';
import { INSTANCE_STATE_CODES, type Tags } from './model.js';
import { insufficient } from './subnet-pool.js';
import { eniView, instanceView, subnetView, tagList, vpcView } from './views.js';
import { type Ec2World, tagsFrom } from './world.js';

export interface ActionContext {
  readonly world: Ec2World;
  readonly tokens: ClientTokens;
}

export type Output = Record<string, unknown>;
// biome-ignore lint/suspicious/noExplicitAny: each handler narrows its own input to the SDK request type
export type Handler = (ctx: ActionContext, input: any) => Output;

function tagsFor(specs: readonly TagSpecification[] | undefined, resourceType: string): Tags {
  const tags: Tags = new Map();
  for (const spec of specs ?? []) {
    if (spec.ResourceType !== undefined && spec.ResourceType !== resourceType) {
      throw new Ec2ApiError(
        'InvalidParameterValue',
        `'${spec.ResourceType}' is not a valid taggable resource type for this operation.`,
      );
    }
    for (const [k, v] of tagsFrom(spec.Tags)) tags.set(k, v);
  }
  return tags;
}

function runInstances(ctx: ActionContext, input: RunInstancesRequest): Output {
  const { world } = ctx;
  return ctx.tokens.run('RunInstances', input as unknown as Output, () => {
    const template = input.LaunchTemplate ? requireLaunchTemplate(world, input.LaunchTemplate) : undefined;
    const requested = launchInterfaceSpecs(input.NetworkInterfaces);
    if (requested.length > 0 && input.SubnetId !== undefined)
      throw new Ec2ApiError(
        'InvalidParameterCombination',
        'Network interfaces and an instance-level subnet ID may not be specified on the same request',
      );
    if (requested.length > 0 && (input.SecurityGroupIds?.length ?? 0) > 0)
      throw new Ec2ApiError(
        'InvalidParameterCombination',
        'Network interfaces and an instance-level security groups may not be specified on the same request',
      );
    const networkInterfaces = requested.length > 0 ? requested : (template?.networkInterfaces ?? []);
    const bootSpec = networkInterfaces.find((n) => n.deviceIndex === 0 && (n.networkCardIndex ?? 0) === 0);
    const subnetId = input.SubnetId ?? bootSpec?.subnetId;
    if (!subnetId) throw new Ec2ApiError('VPCIdNotSpecified', 'No default VPC for this user.');
    const instanceType = input.InstanceType ?? template?.instanceType;
    if (!instanceType) {
      throw new Ec2ApiError('MissingParameter', 'The request must contain the parameter InstanceType');
    }
    const minCount = input.MinCount ?? 1;
    const maxCount = input.MaxCount ?? minCount;
    if (minCount < 1 || maxCount < minCount) {
      throw new Ec2ApiError('InvalidParameterValue', `Invalid MinCount/MaxCount: ${minCount}/${maxCount}`);
    }
    const request: LaunchRequest = {
      instanceType,
      subnetId,
      securityGroupIds: input.SecurityGroupIds ?? bootSpec?.groupIds ?? [],
      tags: Object.fromEntries(
        tagsFor(
          input.TagSpecifications?.filter((t) => t.ResourceType !== 'network-interface'),
          'instance',
        ),
      ),
      networkInterfaces,
      networkInterfaceTags: {
        ...template?.networkInterfaceTags,
        ...tagsOfType(input.TagSpecifications, 'network-interface'),
      },
      ...(input.ImageId ? { imageId: input.ImageId } : {}),
    };
    const launch = resolveLaunchInterfaces(world, world.limitsOf(instanceType), request);
    // As many instances as every subnet the launch draws from can hold, at least MinCount.
    let fits = maxCount;
    for (const [id, need] of addressesPerLaunch(launch))
      fits = Math.min(fits, Math.floor(world.subnet(id).pool.available() / need));
    if (fits < minCount) {
      throw insufficient();
    }
    const reservationId = world.random.id('r');
    const instances = Array.from({ length: fits }, () => launchInstance(world, { ...request, reservationId }, launch));
    return {
      ReservationId: reservationId,
      OwnerId: world.config.accountId,
      Groups: [],
      Instances: instances.map((i) => instanceView(world, i)),
    };
  });
}

function terminateInstances(ctx: ActionContext, input: TerminateInstancesRequest): Output {
  const ids = input.InstanceIds ?? [];
  if (ids.length === 0) throw new Ec2ApiError('MissingParameter', 'The request must contain the parameter InstanceId');
  for (const id of ids) ctx.world.instance(id);
  ctx.world.requireSettled({ instanceIds: ids });
  const changes = ids.map((id) => terminateInstance(ctx.world, id));
  return {
    TerminatingInstances: changes.map((c) => ({
      InstanceId: c.instanceId,
      PreviousState: { Code: INSTANCE_STATE_CODES[c.previous], Name: c.previous },
      CurrentState: { Code: INSTANCE_STATE_CODES[c.current], Name: c.current },
    })),
  };
}

function createNetworkInterface(ctx: ActionContext, input: CreateNetworkInterfaceRequest): Output {
  return ctx.tokens.run('CreateNetworkInterface', input as unknown as Output, () => {
    if (!input.SubnetId) throw new Ec2ApiError('MissingParameter', 'The request must contain the parameter SubnetId');
    const privateIps = (input.PrivateIpAddresses ?? []).map((p, i) => ({
      address: p.PrivateIpAddress ?? '',
      primary: p.Primary ?? (i === 0 && input.PrivateIpAddress === undefined),
    }));
    if (input.PrivateIpAddress !== undefined) {
      const already = privateIps.find((p) => p.address === input.PrivateIpAddress);
      if (already) already.primary = true;
      else privateIps.unshift({ address: input.PrivateIpAddress, primary: true });
    }
    const eni = createEni(ctx.world, {
      subnetId: input.SubnetId,
      description: input.Description ?? '',
      groupIds: input.Groups ?? [],
      privateIps,
      ...(input.SecondaryPrivateIpAddressCount !== undefined
        ? { secondaryCount: input.SecondaryPrivateIpAddressCount }
        : {}),
      prefixes: (input.Ipv4Prefixes ?? []).map((p) => p.Ipv4Prefix ?? ''),
      ...(input.Ipv4PrefixCount !== undefined ? { prefixCount: input.Ipv4PrefixCount } : {}),
      ipv6: {
        addresses: (input.Ipv6Addresses ?? []).map((a) => a.Ipv6Address ?? ''),
        ...(input.Ipv6AddressCount !== undefined ? { count: input.Ipv6AddressCount } : {}),
        prefixes: (input.Ipv6Prefixes ?? []).map((p) => p.Ipv6Prefix ?? ''),
        ...(input.Ipv6PrefixCount !== undefined ? { prefixCount: input.Ipv6PrefixCount } : {}),
      },
      tags: tagsFor(input.TagSpecifications, 'network-interface'),
    });
    return { NetworkInterface: eniView(ctx.world, eni), ClientToken: input.ClientToken };
  });
}

function attachNetworkInterface(ctx: ActionContext, input: AttachNetworkInterfaceRequest): Output {
  if (!input.NetworkInterfaceId || !input.InstanceId || input.DeviceIndex === undefined) {
    throw new Ec2ApiError('MissingParameter', 'NetworkInterfaceId, InstanceId and DeviceIndex are required');
  }
  ctx.world.requireSettled({ eniIds: [input.NetworkInterfaceId], instanceIds: [input.InstanceId] });
  const attachmentId = attachEni(ctx.world, {
    eniId: input.NetworkInterfaceId,
    instanceId: input.InstanceId,
    deviceIndex: input.DeviceIndex,
    ...(input.NetworkCardIndex !== undefined ? { networkCardIndex: input.NetworkCardIndex } : {}),
  });
  return { AttachmentId: attachmentId, NetworkCardIndex: input.NetworkCardIndex ?? 0 };
}

function modifyNetworkInterfaceAttribute(ctx: ActionContext, input: ModifyNetworkInterfaceAttributeRequest): Output {
  const eni = ctx.world.eni(input.NetworkInterfaceId ?? '');
  ctx.world.requireSettled({ eniIds: [eni.eniId] });
  if (input.Attachment) {
    const attachmentId = input.Attachment.AttachmentId ?? '';
    const owner = findAttachment(ctx.world, attachmentId);
    if (owner !== eni || !eni.attachment) throw notFound('Attachment', attachmentId);
    if (input.Attachment.DeleteOnTermination !== undefined) {
      eni.attachment.deleteOnTermination = input.Attachment.DeleteOnTermination;
    }
  }
  if (input.Groups) {
    ctx.world.checkGroups(input.Groups, eni.vpcId);
    eni.groupIds = [...input.Groups];
  }
  if (input.Description?.Value !== undefined) eni.description = input.Description.Value;
  if (input.SourceDestCheck?.Value !== undefined) eni.sourceDestCheck = input.SourceDestCheck.Value;
  return {};
}

function assignPrivateIpAddresses(ctx: ActionContext, input: AssignPrivateIpAddressesRequest): Output {
  const eniId = input.NetworkInterfaceId ?? '';
  ctx.world.requireSettled({ eniIds: [eniId] });
  const result = assignAddresses(ctx.world, eniId, {
    addresses: input.PrivateIpAddresses ?? [],
    prefixes: input.Ipv4Prefixes ?? [],
    ...(input.SecondaryPrivateIpAddressCount !== undefined ? { count: input.SecondaryPrivateIpAddressCount } : {}),
    ...(input.Ipv4PrefixCount !== undefined ? { prefixCount: input.Ipv4PrefixCount } : {}),
    allowReassignment: input.AllowReassignment ?? false,
  });
  return {
    NetworkInterfaceId: eniId,
    AssignedPrivateIpAddresses: result.addresses.map((PrivateIpAddress) => ({ PrivateIpAddress })),
    AssignedIpv4Prefixes: result.prefixes.map((Ipv4Prefix) => ({ Ipv4Prefix })),
  };
}

function assignIpv6Addresses(ctx: ActionContext, input: AssignIpv6AddressesRequest): Output {
  const eniId = input.NetworkInterfaceId ?? '';
  ctx.world.requireSettled({ eniIds: [eniId] });
  const result = assignIpv6(ctx.world, eniId, {
    addresses: input.Ipv6Addresses ?? [],
    ...(input.Ipv6AddressCount !== undefined ? { count: input.Ipv6AddressCount } : {}),
    prefixes: input.Ipv6Prefixes ?? [],
    ...(input.Ipv6PrefixCount !== undefined ? { prefixCount: input.Ipv6PrefixCount } : {}),
  });
  return {
    NetworkInterfaceId: eniId,
    AssignedIpv6Addresses: result.addresses,
    AssignedIpv6Prefixes: result.prefixes,
  };
}

function tagResources(ctx: ActionContext, input: CreateTagsRequest | DeleteTagsRequest, remove: boolean): Output {
  const resources = input.Resources ?? [];
  if (resources.length === 0)
    throw new Ec2ApiError('MissingParameter', 'The request must contain the parameter resourceIdSet');
  ctx.world.requireSettled({ eniIds: resources, instanceIds: resources });
  // Resolve every id before changing anything: a bad id fails the whole call with no partial tagging.
  const targets = resources.map((id) => ctx.world.tagsOf(id));
  for (const tags of targets) {
    for (const tag of input.Tags ?? []) {
      if (tag.Key === undefined) continue;
      if (!remove) tags.set(tag.Key, tag.Value ?? '');
      else if (tag.Value === undefined || tags.get(tag.Key) === tag.Value) tags.delete(tag.Key);
    }
    if (remove && (input.Tags ?? []).length === 0) tags.clear();
  }
  return {};
}

export const HANDLERS: Readonly<Record<string, Handler>> = {
  ...DESCRIBE_HANDLERS,
  CreateVpc: (ctx, input: CreateVpcRequest) => {
    const vpc = ctx.world.createVpc(input.CidrBlock ?? '', input.AmazonProvidedIpv6CidrBlock === true);
    for (const [k, v] of tagsFor(input.TagSpecifications, 'vpc')) vpc.tags.set(k, v);
    return { Vpc: vpcView(ctx.world, vpc.vpcId) };
  },
  CreateSubnet: (ctx, input: CreateSubnetRequest) => {
    const subnet = ctx.world.createSubnet(
      input.VpcId ?? '',
      input.CidrBlock ?? '',
      input.AvailabilityZone,
      input.Ipv6CidrBlock,
    );
    for (const [k, v] of tagsFor(input.TagSpecifications, 'subnet')) subnet.tags.set(k, v);
    return { Subnet: subnetView(ctx.world, subnet.subnetId) };
  },
  CreateSecurityGroup: (ctx, input: CreateSecurityGroupRequest) => {
    const group = ctx.world.createSecurityGroup(input.GroupName ?? '', input.Description ?? '', input.VpcId ?? '');
    for (const [k, v] of tagsFor(input.TagSpecifications, 'security-group')) group.tags.set(k, v);
    return { GroupId: group.groupId, Tags: tagList(group.tags) };
  },
  RunInstances: runInstances,
  CreateLaunchTemplate: (ctx, input: CreateLaunchTemplateRequest) => {
    const t = createLaunchTemplate(ctx.world, input);
    return {
      LaunchTemplate: {
        LaunchTemplateId: t.launchTemplateId,
        LaunchTemplateName: t.launchTemplateName,
        DefaultVersionNumber: 1,
        LatestVersionNumber: 1,
        CreateTime: new Date(ctx.world.timeline.nowMs()),
      },
    };
  },
  ModifySubnetAttribute: (ctx, input: ModifySubnetAttributeRequest) => {
    const subnet = ctx.world.subnet(input.SubnetId ?? '');
    if (input.MapPublicIpOnLaunch?.Value !== undefined) subnet.mapPublicIpOnLaunch = input.MapPublicIpOnLaunch.Value;
    return {};
  },
  TerminateInstances: terminateInstances,
  CreateNetworkInterface: createNetworkInterface,
  AttachNetworkInterface: attachNetworkInterface,
  DetachNetworkInterface: (ctx, input: DetachNetworkInterfaceRequest) => {
    detachEni(ctx.world, input.AttachmentId ?? '');
    return {};
  },
  DeleteNetworkInterface: (ctx, input: DeleteNetworkInterfaceRequest) => {
    ctx.world.requireSettled({ eniIds: [input.NetworkInterfaceId] });
    deleteEni(ctx.world, input.NetworkInterfaceId ?? '');
    return {};
  },
  ModifyNetworkInterfaceAttribute: modifyNetworkInterfaceAttribute,
  AssignPrivateIpAddresses: assignPrivateIpAddresses,
  UnassignPrivateIpAddresses: (ctx, input: UnassignPrivateIpAddressesRequest) => {
    ctx.world.requireSettled({ eniIds: [input.NetworkInterfaceId] });
    unassignAddresses(
      ctx.world,
      input.NetworkInterfaceId ?? '',
      input.PrivateIpAddresses ?? [],
      input.Ipv4Prefixes ?? [],
    );
    return {};
  },
  AssignIpv6Addresses: assignIpv6Addresses,
  UnassignIpv6Addresses: (ctx, input: UnassignIpv6AddressesRequest) => {
    const eniId = input.NetworkInterfaceId ?? '';
    ctx.world.requireSettled({ eniIds: [eniId] });
    const gone = unassignIpv6(ctx.world, eniId, input.Ipv6Addresses ?? [], input.Ipv6Prefixes ?? []);
    return {
      NetworkInterfaceId: eniId,
      UnassignedIpv6Addresses: gone.addresses,
      UnassignedIpv6Prefixes: gone.prefixes,
    };
  },
  CreateTags: (ctx, input: CreateTagsRequest) => tagResources(ctx, input, false),
  DeleteTags: (ctx, input: DeleteTagsRequest) => tagResources(ctx, input, true),
};
