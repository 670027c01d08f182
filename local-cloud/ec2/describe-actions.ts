import type {
  DescribeInstancesRequest,
  DescribeInstanceTypesRequest,
  DescribeNetworkInterfacesRequest,
  DescribeSecurityGroupsRequest,
  DescribeSubnetsRequest,
  DescribeVpcsRequest,
} from '@aws-sdk/client-ec2';
import type { ActionContext, Handler, Output } from './actions.js';
import { Ec2ApiError, notFound } from './errors.js';
import { applyFilters, type FieldGetter, paginate } from './filters.js';
import { type EniRecord, INSTANCE_STATE_CODES, type InstanceRecord } from './model.js';
import { enisOf, eniView, groupView, instanceTypeView, instanceView, subnetView, vpcView } from './views.js';
import type { Ec2World } from './world.js';

/** Describe by ids: every id must exist and be visible (eventual consistency), or the whole call fails. */
function byIds<T extends object>(
  world: Ec2World,
  ids: readonly string[] | undefined,
  all: ReadonlyMap<string, T>,
  missing: (id: string) => Ec2ApiError,
): T[] {
  const now = world.timeline.nowMs();
  const visible = (r: T): boolean => ((r as { visibleAtMs?: number }).visibleAtMs ?? 0) <= now;
  if (!ids || ids.length === 0) return [...all.values()].filter(visible);
  return ids.map((id) => {
    const record = all.get(id);
    if (!record || !visible(record)) throw missing(id);
    return record;
  });
}

const ENI_FIELDS: Record<string, FieldGetter<EniRecord>> = {
  'network-interface-id': (e) => [e.eniId],
  'subnet-id': (e) => [e.subnetId],
  'vpc-id': (e) => [e.vpcId],
  'availability-zone': (e) => [e.availabilityZone],
  status: (e) => [e.attachment ? 'in-use' : 'available'],
  'mac-address': (e) => [e.mac],
  description: (e) => [e.description],
  'private-ip-address': (e) => e.privateIps,
  'addresses.private-ip-address': (e) => e.privateIps,
  'ipv4-prefix': (e) => e.prefixes,
  'ipv6-addresses.ipv6-address': (e) => e.ipv6Addresses,
  'group-id': (e) => e.groupIds,
  'attachment.instance-id': (e) => [e.attachment?.instanceId],
  'attachment.attachment-id': (e) => [e.attachment?.attachmentId],
  'attachment.status': (e) => [e.attachment?.status],
  'attachment.device-index': (e) => [e.attachment?.deviceIndex],
  'attachment.network-card-index': (e) => [e.attachment?.networkCardIndex],
  'attachment.delete-on-termination': (e) => [e.attachment?.deleteOnTermination],
  'requester-managed': () => [false],
  'interface-type': () => ['interface'],
  'source-dest-check': (e) => [e.sourceDestCheck],
};

const INSTANCE_FIELDS: Record<string, FieldGetter<InstanceRecord>> = {
  'instance-id': (i) => [i.instanceId],
  'instance-type': (i) => [i.instanceType],
  'instance-state-name': (i) => [i.state],
  'instance-state-code': (i) => [INSTANCE_STATE_CODES[i.state]],
  'subnet-id': (i) => [i.subnetId],
  'vpc-id': (i) => [i.vpcId],
  'availability-zone': (i) => [i.availabilityZone],
  'private-ip-address': (i) => [i.privateIp],
  'image-id': (i) => [i.imageId],
  'reservation-id': (i) => [i.reservationId],
  'instance.group-id': (i) => i.groupIds,
};

function describeEnis(ctx: ActionContext, input: DescribeNetworkInterfacesRequest): Output {
  const { world } = ctx;
  if (input.NetworkInterfaceIds?.length && input.MaxResults !== undefined) {
    throw new Ec2ApiError(
      'InvalidParameterCombination',
      'The parameter NetworkInterfaceIds cannot be used with the parameter maxResults',
    );
  }
  const candidates = byIds(world, input.NetworkInterfaceIds, world.enis, (id) => notFound('NetworkInterface', id));
  const matched = applyFilters(candidates, input.Filters, ENI_FIELDS, (e) => e.tags);
  const page = paginate(matched, input.MaxResults, input.NextToken, queryOf(input));
  return { NetworkInterfaces: page.items.map((e) => eniView(world, e)), NextToken: page.nextToken };
}

function describeInstances(ctx: ActionContext, input: DescribeInstancesRequest): Output {
  const { world } = ctx;
  if (input.InstanceIds?.length && input.MaxResults !== undefined) {
    throw new Ec2ApiError(
      'InvalidParameterCombination',
      'The parameter instancesSet cannot be used with the parameter maxResults',
    );
  }
  const candidates = byIds(world, input.InstanceIds, world.instances, (id) => notFound('Instance', id));
  const fields: Record<string, FieldGetter<InstanceRecord>> = {
    ...INSTANCE_FIELDS,
    'network-interface.network-interface-id': (i) => enisOf(world, i.instanceId).map((e) => e.eniId),
    'network-interface.addresses.private-ip-address': (i) => enisOf(world, i.instanceId).flatMap((e) => e.privateIps),
  };
  const matched = applyFilters(candidates, input.Filters, fields, (i) => i.tags);
  const page = paginate(matched, input.MaxResults, input.NextToken, queryOf(input));
  const reservations = new Map<string, InstanceRecord[]>();
  for (const instance of page.items) {
    const list = reservations.get(instance.reservationId) ?? [];
    list.push(instance);
    reservations.set(instance.reservationId, list);
  }
  return {
    Reservations: [...reservations].map(([ReservationId, instances]) => ({
      ReservationId,
      OwnerId: world.config.accountId,
      Groups: [],
      Instances: instances.map((i) => instanceView(world, i)),
    })),
    NextToken: page.nextToken,
  };
}

/** What identifies a paginated query (everything but the paging fields). */
function queryOf(input: object): string {
  const { NextToken: _n, MaxResults: _m, ...rest } = input as Record<string, unknown>;
  return JSON.stringify(rest);
}

/** The Describe actions: ids (all or nothing, eventual consistency), filters, then pagination. */
export const DESCRIBE_HANDLERS: Readonly<Record<string, Handler>> = {
  DescribeInstances: describeInstances,
  DescribeInstanceTypes: (ctx, input: DescribeInstanceTypesRequest) => {
    const types = ctx.world.config.instanceTypes;
    const wanted = input.InstanceTypes?.length
      ? input.InstanceTypes.map((t) => {
          const limits = types.get(t);
          if (!limits) {
            throw new Ec2ApiError('InvalidInstanceType', `The following supplied instance types do not exist: [${t}]`);
          }
          return limits;
        })
      : [...types.values()];
    const matched = applyFilters(
      wanted,
      input.Filters,
      {
        'instance-type': (l) => [l.instanceType],
        'bare-metal': (l) => [l.bareMetal ?? false],
        hypervisor: (l) => [l.hypervisor],
        'network-info.maximum-network-interfaces': (l) => [l.maxEnis],
        'network-info.ipv4-addresses-per-interface': (l) => [l.ipv4PerEni],
      },
      () => new Map(),
    );
    const page = paginate(matched, input.MaxResults, input.NextToken, queryOf(input), { min: 5, max: 100 });
    return { InstanceTypes: page.items.map(instanceTypeView), NextToken: page.nextToken };
  },
  DescribeSubnets: (ctx, input: DescribeSubnetsRequest) => {
    const { world } = ctx;
    const candidates = byIds(world, input.SubnetIds, world.subnets, (id) => notFound('Subnet', id));
    const matched = applyFilters(
      candidates,
      input.Filters,
      {
        'subnet-id': (s) => [s.subnetId],
        'vpc-id': (s) => [s.vpcId],
        'availability-zone': (s) => [s.availabilityZone],
        'availability-zone-id': (s) => [s.availabilityZoneId],
        'cidr-block': (s) => [s.cidrBlock],
        state: () => ['available'],
        'available-ip-address-count': (s) => [s.pool.available()],
      },
      (s) => s.tags,
    );
    const page = paginate(matched, input.MaxResults, input.NextToken, queryOf(input));
    return { Subnets: page.items.map((s) => subnetView(world, s.subnetId)), NextToken: page.nextToken };
  },
  DescribeVpcs: (ctx, input: DescribeVpcsRequest) => {
    const { world } = ctx;
    const candidates = byIds(world, input.VpcIds, world.vpcs, (id) => notFound('Vpc', id));
    const matched = applyFilters(
      candidates,
      input.Filters,
      {
        'vpc-id': (v) => [v.vpcId],
        'cidr-block': (v) => [v.cidrBlock],
        'cidr-block-association.cidr-block': (v) => [v.cidrBlock],
        state: () => ['available'],
        'is-default': () => [false],
      },
      (v) => v.tags,
    );
    const page = paginate(matched, input.MaxResults, input.NextToken, queryOf(input));
    return { Vpcs: page.items.map((v) => vpcView(world, v.vpcId)), NextToken: page.nextToken };
  },
  DescribeSecurityGroups: (ctx, input: DescribeSecurityGroupsRequest) => {
    const { world } = ctx;
    let candidates = byIds(world, input.GroupIds, world.groups, (id) => notFound('Group', id));
    if (input.GroupNames?.length) {
      const names = input.GroupNames;
      for (const name of names) {
        if (!candidates.some((g) => g.groupName === name)) throw notFound('Group', name);
      }
      candidates = candidates.filter((g) => names.includes(g.groupName));
    }
    const matched = applyFilters(
      candidates,
      input.Filters,
      {
        'group-id': (g) => [g.groupId],
        'group-name': (g) => [g.groupName],
        'vpc-id': (g) => [g.vpcId],
        description: (g) => [g.description],
      },
      (g) => g.tags,
    );
    const page = paginate(matched, input.MaxResults, input.NextToken, queryOf(input));
    return { SecurityGroups: page.items.map((g) => groupView(world, g.groupId)), NextToken: page.nextToken };
  },
  DescribeNetworkInterfaces: describeEnis,
  DescribeAvailabilityZones: (ctx) => {
    const region = ctx.world.config.region;
    return {
      AvailabilityZones: ['a', 'b', 'c'].map((suffix, i) => ({
        ZoneName: `${region}${suffix}`,
        ZoneId: `use1-az${i + 1}`,
        RegionName: region,
        State: 'available',
        ZoneType: 'availability-zone',
      })),
    };
  },
};
