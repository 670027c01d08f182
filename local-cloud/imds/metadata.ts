import { partitionOfRegion } from '../../shared/domain/partition.js';
import type { Ec2SimulatorApi, SimInstance, SimInterface } from '../ports.js';

/**
 * The metadata tree of one instance, built on every request from the EC2 simulator's state so attachments
 * and assigned addresses show up (and disappear) as they change. A directory is a map (listed with trailing
 * slashes for subdirectories, as IMDS lists them); a leaf is a string.
 */
export type MetadataNode = string | { readonly [name: string]: MetadataNode };

export interface InstanceRole {
  readonly name: string;
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken: string;
}

function hostname(ip: string, region: string): string {
  const suffix = region === 'us-east-1' ? 'ec2.internal' : `${region}.compute.internal`;
  return `ip-${ip.replace(/\./g, '-')}.${suffix}`;
}

function interfaceNode(eni: SimInterface, instance: SimInstance): MetadataNode {
  const node: Record<string, MetadataNode> = {
    'device-number': String(eni.deviceIndex),
    'interface-id': eni.eniId,
    'local-hostname': hostname(eni.privateIpAddresses[0] ?? instance.privateIpAddress, instance.region),
    'local-ipv4s': eni.privateIpAddresses.join('\n'),
    mac: eni.mac,
    'network-card-index': String(eni.networkCardIndex),
    'owner-id': instance.accountId,
    'subnet-id': eni.subnetId,
    'subnet-ipv4-cidr-block': eni.subnetCidr,
    'vpc-id': eni.vpcId,
    'vpc-ipv4-cidr-block': eni.vpcCidrs[0] ?? '',
    'vpc-ipv4-cidr-blocks': eni.vpcCidrs.join('\n'),
  };
  // Like IMDS, the key exists only while the interface has delegated prefixes.
  if (eni.ipv4Prefixes.length > 0) node['ipv4-prefix'] = eni.ipv4Prefixes.join('\n');
  return node;
}

export function identityDocument(instance: SimInstance): string {
  return JSON.stringify(
    {
      accountId: instance.accountId,
      architecture: 'x86_64',
      availabilityZone: instance.availabilityZone,
      billingProducts: null,
      devpayProductCodes: null,
      marketplaceProductCodes: null,
      imageId: instance.imageId,
      instanceId: instance.instanceId,
      instanceType: instance.instanceType,
      kernelId: null,
      pendingTime: new Date(instance.launchTimeMs).toISOString().replace(/\.\d{3}Z$/, 'Z'),
      privateIp: instance.privateIpAddress,
      ramdiskId: null,
      region: instance.region,
      version: '2017-09-30',
    },
    null,
    2,
  );
}

export function metadataTree(
  ec2: Ec2SimulatorApi,
  instance: SimInstance,
  role: InstanceRole,
  credentialsExpireAtMs: number,
  nowMs: number,
): MetadataNode {
  // Only attached interfaces are visible to the instance; one still attaching has no device yet.
  const interfaces = ec2.instanceInterfaces(instance.instanceId).filter((eni) => eni.attachmentState === 'attached');
  const primary = interfaces.find((eni) => eni.deviceIndex === 0);
  const macs: Record<string, MetadataNode> = {};
  for (const eni of interfaces) macs[eni.mac] = interfaceNode(eni, instance);
  // IMDS answers the partition the instance runs in; a Region no partition takes gets none, as a stand-in would.
  const partition = partitionOfRegion(instance.region);
  const updated = new Date(nowMs).toISOString().replace(/\.\d{3}Z$/, 'Z');
  const expiration = new Date(credentialsExpireAtMs).toISOString().replace(/\.\d{3}Z$/, 'Z');
  return {
    'meta-data': {
      'ami-id': instance.imageId,
      hostname: hostname(instance.privateIpAddress, instance.region),
      iam: {
        info: JSON.stringify(
          {
            Code: 'Success',
            LastUpdated: updated,
            InstanceProfileArn: `arn:${partition?.id ?? 'aws'}:iam::${instance.accountId}:instance-profile/${role.name}`,
            InstanceProfileId: 'AIPALOCALCLOUDPROFILE',
          },
          null,
          2,
        ),
        'security-credentials': {
          [role.name]: JSON.stringify(
            {
              Code: 'Success',
              LastUpdated: updated,
              Type: 'AWS-HMAC',
              AccessKeyId: role.accessKeyId,
              SecretAccessKey: role.secretAccessKey,
              Token: role.sessionToken,
              Expiration: expiration,
            },
            null,
            2,
          ),
        },
      },
      'instance-id': instance.instanceId,
      'instance-type': instance.instanceType,
      'local-hostname': hostname(instance.privateIpAddress, instance.region),
      'local-ipv4': instance.privateIpAddress,
      ...(primary ? { mac: primary.mac } : {}),
      network: { interfaces: { macs } },
      placement: {
        'availability-zone': instance.availabilityZone,
        region: instance.region,
      },
      ...(partition ? { services: { domain: partition.dnsSuffix, partition: partition.id } } : {}),
    },
    dynamic: {
      'instance-identity': {
        document: identityDocument(instance),
      },
    },
  };
}

/** Walks `segments` down the tree; undefined when a segment does not exist. */
export function lookup(tree: MetadataNode, segments: readonly string[]): MetadataNode | undefined {
  let node: MetadataNode | undefined = tree;
  for (const segment of segments) {
    if (node === undefined || typeof node === 'string') return undefined;
    node = node[segment];
  }
  return node;
}

/** A directory's listing: one entry per line, subdirectories with a trailing slash. */
export function listing(node: { readonly [name: string]: MetadataNode }): string {
  return Object.entries(node)
    .map(([name, value]) => (typeof value === 'string' ? name : `${name}/`))
    .join('\n');
}
