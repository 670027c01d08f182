import type {
  Instance,
  InstanceNetworkInterface,
  InstanceTypeInfo,
  NetworkInterface,
  SecurityGroup,
  Subnet,
  Tag,
  Vpc,
} from '@aws-sdk/client-ec2';
import type { InstanceLimits } from '../../shared/domain/limits.js';
import { partitionIdOfRegion } from '../../shared/domain/partition.js';
import { type EniRecord, INSTANCE_STATE_CODES, type InstanceRecord, type Tags } from './model.js';
import type { Ec2World } from './world.js';

/** Records → the SDK's output shapes, which the codec writes as EC2 XML. */
export function tagList(tags: Tags): Tag[] | undefined {
  if (tags.size === 0) return undefined;
  return [...tags].map(([Key, Value]) => ({ Key, Value }));
}

export function vpcView(world: Ec2World, vpcId: string): Vpc {
  const vpc = world.vpc(vpcId);
  return {
    VpcId: vpc.vpcId,
    CidrBlock: vpc.cidrBlock,
    State: 'available',
    OwnerId: world.config.accountId,
    InstanceTenancy: 'default',
    IsDefault: false,
    DhcpOptionsId: 'default',
    CidrBlockAssociationSet: [
      {
        AssociationId: `vpc-cidr-assoc-${vpc.vpcId.slice(4)}`,
        CidrBlock: vpc.cidrBlock,
        CidrBlockState: { State: 'associated' },
      },
    ],
    Ipv6CidrBlockAssociationSet: vpc.ipv6CidrBlock
      ? [
          {
            AssociationId: `vpc-cidr-assoc-6${vpc.vpcId.slice(5)}`,
            Ipv6CidrBlock: vpc.ipv6CidrBlock,
            Ipv6CidrBlockState: { State: 'associated' },
            NetworkBorderGroup: world.config.region,
            Ipv6Pool: 'Amazon',
          },
        ]
      : undefined,
    Tags: tagList(vpc.tags),
  };
}

export function subnetView(world: Ec2World, subnetId: string): Subnet {
  const s = world.subnet(subnetId);
  return {
    SubnetId: s.subnetId,
    VpcId: s.vpcId,
    CidrBlock: s.cidrBlock,
    AvailabilityZone: s.availabilityZone,
    AvailabilityZoneId: s.availabilityZoneId,
    AvailableIpAddressCount: s.pool.available(),
    State: 'available',
    OwnerId: world.config.accountId,
    DefaultForAz: false,
    MapPublicIpOnLaunch: s.mapPublicIpOnLaunch,
    AssignIpv6AddressOnCreation: false,
    Ipv6Native: false,
    Ipv6CidrBlockAssociationSet: s.ipv6
      ? [
          {
            AssociationId: `subnet-cidr-assoc-${s.subnetId.slice(7)}`,
            Ipv6CidrBlock: s.ipv6.cidr,
            Ipv6CidrBlockState: { State: 'associated' },
          },
        ]
      : undefined,
    SubnetArn: `arn:${partitionIdOfRegion(world.config.region)}:ec2:${world.config.region}:${world.config.accountId}:subnet/${s.subnetId}`,
    Tags: tagList(s.tags),
  };
}

export function groupView(world: Ec2World, groupId: string): SecurityGroup {
  const g = world.groups.get(groupId);
  if (!g) throw new Error(`unknown group ${groupId}`);
  return {
    GroupId: g.groupId,
    GroupName: g.groupName,
    Description: g.description,
    VpcId: g.vpcId,
    OwnerId: world.config.accountId,
    IpPermissions: [],
    IpPermissionsEgress: [{ IpProtocol: '-1', IpRanges: [{ CidrIp: '0.0.0.0/0' }] }],
    Tags: tagList(g.tags),
  };
}

function groupRefs(world: Ec2World, groupIds: readonly string[]): { GroupId: string; GroupName: string }[] {
  return groupIds.map((id) => ({ GroupId: id, GroupName: world.groups.get(id)?.groupName ?? id }));
}

export function eniView(world: Ec2World, eni: EniRecord): NetworkInterface {
  const a = eni.attachment;
  return {
    NetworkInterfaceId: eni.eniId,
    SubnetId: eni.subnetId,
    VpcId: eni.vpcId,
    AvailabilityZone: eni.availabilityZone,
    Description: eni.description,
    MacAddress: eni.mac,
    OwnerId: world.config.accountId,
    RequesterManaged: false,
    SourceDestCheck: eni.sourceDestCheck,
    Status: a ? 'in-use' : 'available',
    InterfaceType: 'interface',
    PrivateIpAddress: eni.privateIps[0],
    PrivateIpAddresses: eni.privateIps.map((ip, i) => ({ PrivateIpAddress: ip, Primary: i === 0 })),
    Ipv4Prefixes: eni.prefixes.length ? eni.prefixes.map((p) => ({ Ipv4Prefix: p })) : undefined,
    ...ipv6Of(eni),
    Groups: groupRefs(world, eni.groupIds),
    TagSet: tagList(eni.tags),
    Attachment: a
      ? {
          AttachmentId: a.attachmentId,
          InstanceId: a.instanceId,
          InstanceOwnerId: world.config.accountId,
          DeviceIndex: a.deviceIndex,
          NetworkCardIndex: a.networkCardIndex,
          Status: a.status,
          AttachTime: new Date(a.attachTimeMs),
          DeleteOnTermination: a.deleteOnTermination,
        }
      : undefined,
  };
}

/** The IPv6 members both ENI shapes share (the SDK's NetworkInterface and InstanceNetworkInterface). */
function ipv6Of(eni: EniRecord): Pick<NetworkInterface, 'Ipv6Addresses' | 'Ipv6Prefixes'> {
  return {
    Ipv6Addresses: eni.ipv6Addresses.length
      ? eni.ipv6Addresses.map((Ipv6Address) => ({ Ipv6Address, IsPrimaryIpv6: false }))
      : undefined,
    Ipv6Prefixes: eni.ipv6Prefixes.length ? eni.ipv6Prefixes.map((Ipv6Prefix) => ({ Ipv6Prefix })) : undefined,
  };
}

function instanceEniView(world: Ec2World, eni: EniRecord): InstanceNetworkInterface {
  const a = eni.attachment;
  return {
    NetworkInterfaceId: eni.eniId,
    SubnetId: eni.subnetId,
    VpcId: eni.vpcId,
    Description: eni.description,
    MacAddress: eni.mac,
    OwnerId: world.config.accountId,
    SourceDestCheck: eni.sourceDestCheck,
    Status: a ? 'in-use' : 'available',
    InterfaceType: 'interface',
    PrivateIpAddress: eni.privateIps[0],
    PrivateIpAddresses: eni.privateIps.map((ip, i) => ({ PrivateIpAddress: ip, Primary: i === 0 })),
    Ipv4Prefixes: eni.prefixes.length ? eni.prefixes.map((p) => ({ Ipv4Prefix: p })) : undefined,
    ...ipv6Of(eni),
    Groups: groupRefs(world, eni.groupIds),
    Attachment: a
      ? {
          AttachmentId: a.attachmentId,
          DeviceIndex: a.deviceIndex,
          NetworkCardIndex: a.networkCardIndex,
          Status: a.status,
          AttachTime: new Date(a.attachTimeMs),
          DeleteOnTermination: a.deleteOnTermination,
        }
      : undefined,
  };
}

/** Attached, attaching and detaching ENIs of an instance, by network card then device index. */
export function enisOf(world: Ec2World, instanceId: string): EniRecord[] {
  return [...world.enis.values()]
    .filter((e) => e.attachment?.instanceId === instanceId)
    .sort(
      (x, y) =>
        (x.attachment?.networkCardIndex ?? 0) - (y.attachment?.networkCardIndex ?? 0) ||
        (x.attachment?.deviceIndex ?? 0) - (y.attachment?.deviceIndex ?? 0),
    );
}

export function instanceView(world: Ec2World, instance: InstanceRecord): Instance {
  const gone = instance.state === 'terminated';
  return {
    InstanceId: instance.instanceId,
    InstanceType: instance.instanceType as Instance['InstanceType'],
    ImageId: instance.imageId,
    State: { Code: INSTANCE_STATE_CODES[instance.state], Name: instance.state },
    StateTransitionReason: instance.stateReason ?? '',
    Placement: { AvailabilityZone: instance.availabilityZone, Tenancy: 'default' },
    SubnetId: gone ? undefined : instance.subnetId,
    VpcId: gone ? undefined : instance.vpcId,
    PrivateIpAddress: gone ? undefined : instance.privateIp,
    PublicIpAddress: gone ? undefined : instance.publicIp,
    LaunchTime: new Date(instance.launchTimeMs),
    Architecture: 'x86_64',
    Hypervisor: 'xen',
    RootDeviceType: 'ebs',
    RootDeviceName: '/dev/xvda',
    AmiLaunchIndex: 0,
    SecurityGroups: groupRefs(world, instance.groupIds),
    NetworkInterfaces: enisOf(world, instance.instanceId).map((e) => instanceEniView(world, e)),
    Tags: tagList(instance.tags),
    MetadataOptions: { HttpTokens: 'required', HttpEndpoint: 'enabled', HttpPutResponseHopLimit: 1, State: 'applied' },
  };
}

export function instanceTypeView(limits: InstanceLimits): InstanceTypeInfo {
  return {
    InstanceType: limits.instanceType as InstanceTypeInfo['InstanceType'],
    BareMetal: limits.bareMetal ?? false,
    Hypervisor: limits.bareMetal ? undefined : ((limits.hypervisor ?? 'nitro') as InstanceTypeInfo['Hypervisor']),
    CurrentGeneration: true,
    NetworkInfo: {
      MaximumNetworkInterfaces: limits.maxEnis,
      Ipv4AddressesPerInterface: limits.ipv4PerEni,
      Ipv6AddressesPerInterface: limits.ipv4PerEni,
      Ipv6Supported: true,
      MaximumNetworkCards: limits.networkCards.length,
      DefaultNetworkCardIndex: limits.defaultNetworkCardIndex,
      NetworkCards: limits.networkCards.map((c) => ({
        NetworkCardIndex: c.networkCardIndex,
        MaximumNetworkInterfaces: c.maxEnis,
      })),
      EncryptionInTransitSupported: limits.hypervisor === 'nitro',
    },
  };
}
