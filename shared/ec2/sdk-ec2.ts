import {
  type _InstanceType,
  AssignPrivateIpAddressesCommand,
  AttachNetworkInterfaceCommand,
  CreateNetworkInterfaceCommand,
  CreateTagsCommand,
  DeleteNetworkInterfaceCommand,
  DeleteTagsCommand,
  DescribeInstancesCommand,
  type DescribeInstancesCommandOutput,
  DescribeInstanceTypesCommand,
  DescribeNetworkInterfacesCommand,
  DescribeSubnetsCommand,
  DetachNetworkInterfaceCommand,
  EC2Client,
  type EC2ClientConfig,
  type Filter,
  type Instance,
  type InstanceNetworkInterface,
  ModifyNetworkInterfaceAttributeCommand,
  type NetworkInterface,
  type Tag,
  UnassignPrivateIpAddressesCommand,
} from '@aws-sdk/client-ec2';
import type { InstanceLimits } from '../domain/limits.js';
import { canonicalIpv6, formatIpv6Cidr, parseIpv6Cidr } from '../ipv6.js';
import { type Dimensions, METRIC_DIMENSIONS, METRIC_NAMES, type Metrics } from '../metrics.js';
import { Ec2ApiError, toEc2ApiError } from './errors.js';
import {
  type AttachEniRequest,
  type AttachmentStatus,
  type CreateEniRequest,
  type Ec2Eni,
  type Ec2Instance,
  type Ec2Port,
  type Ec2Subnet,
  type EniQuery,
  MUTATING_ACTIONS,
  type SubnetQuery,
} from './port.js';
import {
  describeEnisInput,
  describeInstancesInput,
  describeSubnetsInput,
  eniFilters,
  idFilterBatches,
  pages,
  subnetFilters,
} from './sdk-describe.js';
import { Semaphore } from './semaphore.js';

export interface SdkEc2Options {
  /** A client to use as is (tests add middleware to it); otherwise one is built from `clientConfig`. */
  readonly client?: EC2Client;
  readonly clientConfig?: EC2ClientConfig;
  /** Concurrent mutating calls allowed from this adapter (default 8). */
  readonly maxConcurrentMutations?: number;
  readonly metrics?: Metrics;
  /** Added as the `ClusterName` dimension of Ec2Errors, which the throttling alarm filters on. */
  readonly clusterName?: string;
}

/**
 * The SDK's adaptive mode adds a client-side token bucket that slows down after throttling answers, on top of
 * exponential back-off; 5 attempts keep a Lambda invocation short — past them the executor persists its
 * progress and re-enqueues instead of waiting inside the function.
 */
export const EC2_CLIENT_DEFAULTS: EC2ClientConfig = { retryMode: 'adaptive', maxAttempts: 5 };

function tagsOf(tags: readonly Tag[] | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const t of tags ?? []) if (t.Key !== undefined) out[t.Key] = t.Value ?? '';
  return out;
}

function toTagList(tags: Readonly<Record<string, string>>): Tag[] {
  return Object.entries(tags).map(([Key, Value]) => ({ Key, Value }));
}

function toEni(n: NetworkInterface | InstanceNetworkInterface, fallback: Partial<Ec2Eni> = {}): Ec2Eni {
  const addresses = n.PrivateIpAddresses ?? [];
  const primary = addresses.find((a) => a.Primary)?.PrivateIpAddress ?? n.PrivateIpAddress ?? '';
  const a = n.Attachment;
  const availabilityZone = 'AvailabilityZone' in n ? (n.AvailabilityZone ?? '') : (fallback.availabilityZone ?? '');
  const tags = 'TagSet' in n ? tagsOf(n.TagSet) : {};
  return {
    eniId: n.NetworkInterfaceId ?? '',
    subnetId: n.SubnetId ?? '',
    vpcId: n.VpcId ?? '',
    availabilityZone,
    mac: (n.MacAddress ?? '').toLowerCase(),
    primaryIp: primary,
    secondaryIps: addresses
      .filter((x) => !x.Primary && x.PrivateIpAddress !== undefined)
      .map((x) => x.PrivateIpAddress as string),
    prefixes: (n.Ipv4Prefixes ?? []).map((p) => p.Ipv4Prefix ?? '').filter((p) => p !== ''),
    ...ipv6Members(n),
    status: n.Status ?? '',
    ...(a?.AttachmentId
      ? {
          attachment: {
            attachmentId: a.AttachmentId,
            instanceId: ('InstanceId' in a ? a.InstanceId : undefined) ?? fallback.attachment?.instanceId ?? '',
            deviceIndex: a.DeviceIndex ?? -1,
            networkCardIndex: a.NetworkCardIndex ?? 0,
            status: (a.Status ?? 'attaching') as AttachmentStatus,
            deleteOnTermination: a.DeleteOnTermination ?? false,
          },
        }
      : {}),
    securityGroupIds: (n.Groups ?? []).map((g) => g.GroupId ?? '').filter((g) => g !== ''),
    tags,
  };
}

/** The EC2 port over `@aws-sdk/client-ec2`. Build one per container and reuse it across invocations. */
export class SdkEc2 implements Ec2Port {
  readonly client: EC2Client;
  private readonly mutations: Semaphore;
  private readonly metrics: Metrics | undefined;
  private readonly errorDimensions: Dimensions;
  private readonly limitsCache = new Map<string, Promise<InstanceLimits>>();

  constructor(options: SdkEc2Options = {}) {
    this.client = options.client ?? new EC2Client({ ...EC2_CLIENT_DEFAULTS, ...options.clientConfig });
    this.mutations = new Semaphore(options.maxConcurrentMutations ?? 8);
    this.metrics = options.metrics;
    this.errorDimensions =
      options.clusterName !== undefined ? { [METRIC_DIMENSIONS.cluster]: options.clusterName } : {};
  }

  /** Every call goes through here: counted by action, capped when mutating, errors classified. */
  private async call<T>(action: string, send: () => Promise<T>): Promise<T> {
    const run = async (): Promise<T> => {
      this.metrics?.add(METRIC_NAMES.ec2Calls, { Action: action });
      try {
        const out = await send();
        const attempts = (out as { $metadata?: { attempts?: number } }).$metadata?.attempts ?? 1;
        if (attempts > 1) this.metrics?.add(METRIC_NAMES.ec2Retries, { Action: action }, attempts - 1);
        return out;
      } catch (err) {
        const classified = toEc2ApiError(action, err);
        const attempts = (err as { $metadata?: { attempts?: number } })?.$metadata?.attempts ?? 1;
        if (attempts > 1) this.metrics?.add(METRIC_NAMES.ec2Retries, { Action: action }, attempts - 1);
        this.metrics?.add(METRIC_NAMES.ec2Errors, { ...this.errorDimensions, Action: action, Kind: classified.kind });
        throw classified;
      }
    };
    return MUTATING_ACTIONS.has(action) ? this.mutations.run(run) : run();
  }

  async describeInstance(instanceId: string): Promise<Ec2Instance | undefined> {
    let out: DescribeInstancesCommandOutput;
    try {
      out = await this.call('DescribeInstances', () =>
        this.client.send(new DescribeInstancesCommand({ InstanceIds: [instanceId] })),
      );
    } catch (err) {
      if (err instanceof Ec2ApiError && err.code === 'InvalidInstanceID.NotFound') return undefined;
      throw err;
    }
    const instance = out.Reservations?.flatMap((r) => r.Instances ?? []).find((i) => i.InstanceId === instanceId);
    return instance ? toInstance(instanceId, instance) : undefined;
  }

  async describeInstances(instanceIds: readonly string[]): Promise<Map<string, Ec2Instance>> {
    const found = new Map<string, Ec2Instance>();
    await this.eachInstancePage(instanceIds, (inst) => {
      if (inst.InstanceId) found.set(inst.InstanceId, toInstance(inst.InstanceId, inst));
    });
    return found;
  }

  /** Cached for the container's life: limits of an instance type do not change. */
  describeInstanceLimits(instanceType: string): Promise<InstanceLimits> {
    const cached = this.limitsCache.get(instanceType);
    if (cached) return cached;
    const pending = this.call('DescribeInstanceTypes', () =>
      this.client.send(new DescribeInstanceTypesCommand({ InstanceTypes: [instanceType as _InstanceType] })),
    ).then((out) => {
      const info = out.InstanceTypes?.find((t) => t.InstanceType === instanceType);
      const net = info?.NetworkInfo;
      if (!info || !net?.MaximumNetworkInterfaces || !net.Ipv4AddressesPerInterface)
        throw toEc2ApiError('DescribeInstanceTypes', {
          name: 'InvalidInstanceType',
          message: `no network limits for ${instanceType}`,
          $metadata: { httpStatusCode: 400 },
        });
      return {
        instanceType,
        maxEnis: net.MaximumNetworkInterfaces,
        ipv4PerEni: net.Ipv4AddressesPerInterface,
        defaultNetworkCardIndex: net.DefaultNetworkCardIndex ?? 0,
        networkCards: (net.NetworkCards ?? []).map((c) => ({
          networkCardIndex: c.NetworkCardIndex ?? 0,
          maxEnis: c.MaximumNetworkInterfaces ?? 0,
        })),
        ...(info.Hypervisor ? { hypervisor: info.Hypervisor } : {}),
        ...(info.BareMetal !== undefined ? { bareMetal: info.BareMetal } : {}),
      } satisfies InstanceLimits;
    });
    this.limitsCache.set(instanceType, pending);
    pending.catch(() => this.limitsCache.delete(instanceType));
    return pending;
  }

  async describeSubnets(query: SubnetQuery): Promise<Ec2Subnet[]> {
    const filters = subnetFilters(query);
    const subnets: Ec2Subnet[] = [];
    const describe = (nextToken: string | undefined) =>
      this.call('DescribeSubnets', () =>
        this.client.send(new DescribeSubnetsCommand(describeSubnetsInput(query, filters, nextToken))),
      );
    for await (const out of pages(describe))
      for (const s of out.Subnets ?? [])
        subnets.push({
          subnetId: s.SubnetId ?? '',
          vpcId: s.VpcId ?? '',
          cidr: s.CidrBlock ?? '',
          ...ipv6CidrOf(s.Ipv6CidrBlockAssociationSet),
          availabilityZone: s.AvailabilityZone ?? '',
          availableIpCount: s.AvailableIpAddressCount ?? 0,
          tags: tagsOf(s.Tags),
        });
    return subnets;
  }

  async describeNetworkInterfaces(query: EniQuery): Promise<Ec2Eni[]> {
    const filters = eniFilters(query);
    // One id list per query: both at once would need their cross product, which no caller wants.
    if (query.filterEniIds && query.attachedToAny) throw new Error('filterEniIds and attachedToAny are exclusive');
    const ids = query.filterEniIds ?? query.attachedToAny;
    if (!ids) return this.eniPages(filters, query.eniIds);
    const name = query.filterEniIds ? 'network-interface-id' : 'attachment.instance-id';
    const enis: Ec2Eni[] = [];
    for (const idFilter of idFilterBatches(name, ids)) enis.push(...(await this.eniPages([...filters, idFilter])));
    return enis;
  }

  private async eniPages(filters: readonly Filter[], eniIds?: readonly string[]): Promise<Ec2Eni[]> {
    const enis: Ec2Eni[] = [];
    const describe = (nextToken: string | undefined) =>
      this.call('DescribeNetworkInterfaces', () =>
        this.client.send(new DescribeNetworkInterfacesCommand(describeEnisInput(filters, eniIds, nextToken))),
      );
    for await (const out of pages(describe)) for (const n of out.NetworkInterfaces ?? []) enis.push(toEni(n));
    return enis;
  }

  async createNetworkInterface(request: CreateEniRequest): Promise<Ec2Eni> {
    const out = await this.call('CreateNetworkInterface', () =>
      this.client.send(
        new CreateNetworkInterfaceCommand({
          SubnetId: request.subnetId,
          ...(request.securityGroupIds.length ? { Groups: [...request.securityGroupIds] } : {}),
          ...(request.ipCount > 0 ? { SecondaryPrivateIpAddressCount: request.ipCount } : {}),
          ...(request.prefixCount > 0 ? { Ipv4PrefixCount: request.prefixCount } : {}),
          ...((request.ipv6PrefixCount ?? 0) > 0 ? { Ipv6PrefixCount: request.ipv6PrefixCount } : {}),
          ClientToken: request.clientToken,
          ...(request.description ? { Description: request.description } : {}),
          TagSpecifications: [{ ResourceType: 'network-interface', Tags: toTagList(request.tags) }],
        }),
      ),
    );
    if (!out.NetworkInterface?.NetworkInterfaceId)
      throw toEc2ApiError('CreateNetworkInterface', {
        name: 'InternalError',
        message: 'no network interface in the answer',
        $metadata: { httpStatusCode: 500 },
      });
    return toEni(out.NetworkInterface);
  }

  async attachNetworkInterface(request: AttachEniRequest): Promise<string> {
    const out = await this.call('AttachNetworkInterface', () =>
      this.client.send(
        new AttachNetworkInterfaceCommand({
          NetworkInterfaceId: request.eniId,
          InstanceId: request.instanceId,
          DeviceIndex: request.deviceIndex,
          NetworkCardIndex: request.networkCardIndex,
        }),
      ),
    );
    return out.AttachmentId ?? '';
  }

  async setDeleteOnTermination(eniId: string, attachmentId: string, deleteOnTermination: boolean): Promise<void> {
    await this.call('ModifyNetworkInterfaceAttribute', () =>
      this.client.send(
        new ModifyNetworkInterfaceAttributeCommand({
          NetworkInterfaceId: eniId,
          Attachment: { AttachmentId: attachmentId, DeleteOnTermination: deleteOnTermination },
        }),
      ),
    );
  }

  async detachNetworkInterface(attachmentId: string, force = false): Promise<void> {
    await this.call('DetachNetworkInterface', () =>
      this.client.send(new DetachNetworkInterfaceCommand({ AttachmentId: attachmentId, Force: force })),
    );
  }

  async deleteNetworkInterface(eniId: string): Promise<void> {
    await this.call('DeleteNetworkInterface', () =>
      this.client.send(new DeleteNetworkInterfaceCommand({ NetworkInterfaceId: eniId })),
    );
  }

  async assignPrivateIpAddresses(
    eniId: string,
    request: { readonly ipCount?: number; readonly prefixCount?: number },
  ): Promise<{ ips: string[]; prefixes: string[] }> {
    const out = await this.call('AssignPrivateIpAddresses', () =>
      this.client.send(
        new AssignPrivateIpAddressesCommand({
          NetworkInterfaceId: eniId,
          ...(request.ipCount ? { SecondaryPrivateIpAddressCount: request.ipCount } : {}),
          ...(request.prefixCount ? { Ipv4PrefixCount: request.prefixCount } : {}),
        }),
      ),
    );
    return {
      ips: (out.AssignedPrivateIpAddresses ?? []).map((a) => a.PrivateIpAddress ?? '').filter((a) => a !== ''),
      prefixes: (out.AssignedIpv4Prefixes ?? []).map((p) => p.Ipv4Prefix ?? '').filter((p) => p !== ''),
    };
  }

  async unassignPrivateIpAddresses(
    eniId: string,
    request: { readonly ips?: readonly string[]; readonly prefixes?: readonly string[] },
  ): Promise<void> {
    await this.call('UnassignPrivateIpAddresses', () =>
      this.client.send(
        new UnassignPrivateIpAddressesCommand({
          NetworkInterfaceId: eniId,
          ...(request.ips?.length ? { PrivateIpAddresses: [...request.ips] } : {}),
          ...(request.prefixes?.length ? { Ipv4Prefixes: [...request.prefixes] } : {}),
        }),
      ),
    );
  }

  async createTags(resourceIds: readonly string[], tags: Readonly<Record<string, string>>): Promise<void> {
    if (resourceIds.length === 0) return;
    await this.call('CreateTags', () =>
      this.client.send(new CreateTagsCommand({ Resources: [...resourceIds], Tags: toTagList(tags) })),
    );
  }

  async deleteTags(resourceIds: readonly string[], keys: readonly string[]): Promise<void> {
    if (resourceIds.length === 0) return;
    await this.call('DeleteTags', () =>
      this.client.send(new DeleteTagsCommand({ Resources: [...resourceIds], Tags: keys.map((Key) => ({ Key })) })),
    );
  }

  async describeInstanceStates(instanceIds: readonly string[]): Promise<Map<string, string>> {
    const states = new Map<string, string>();
    await this.eachInstancePage(instanceIds, (inst) => {
      if (inst.InstanceId) states.set(inst.InstanceId, inst.State?.Name ?? 'unknown');
    });
    return states;
  }

  /** Every instance among `instanceIds` EC2 knows, page by page, 200 ids per call. */
  private async eachInstancePage(instanceIds: readonly string[], visit: (instance: Instance) => void): Promise<void> {
    // A filter, not InstanceIds: one unknown id in InstanceIds fails the whole call with NotFound.
    for (const idFilter of idFilterBatches('instance-id', instanceIds)) {
      const describe = (nextToken: string | undefined) =>
        this.call('DescribeInstances', () =>
          this.client.send(new DescribeInstancesCommand(describeInstancesInput(idFilter, nextToken))),
        );
      for await (const out of pages(describe))
        for (const r of out.Reservations ?? []) for (const inst of r.Instances ?? []) visit(inst);
    }
  }
}

function toInstance(instanceId: string, instance: Instance): Ec2Instance {
  const availabilityZone = instance.Placement?.AvailabilityZone ?? '';
  return {
    instanceId,
    instanceType: instance.InstanceType ?? '',
    state: instance.State?.Name ?? '',
    availabilityZone,
    vpcId: instance.VpcId ?? '',
    subnetId: instance.SubnetId ?? '',
    interfaces: (instance.NetworkInterfaces ?? [])
      .map((n) => toEni(n, { availabilityZone, attachment: { instanceId } as Ec2Eni['attachment'] }))
      .sort((a, b) => (a.attachment?.deviceIndex ?? 0) - (b.attachment?.deviceIndex ?? 0)),
    tags: tagsOf(instance.Tags),
  };
}

/** A subnet's associated IPv6 CIDR in canonical form; none while it has no associated block. */
function ipv6CidrOf(
  set:
    | readonly { Ipv6CidrBlock?: string | undefined; Ipv6CidrBlockState?: { State?: string | undefined } | undefined }[]
    | undefined,
): { ipv6Cidr?: string } {
  const block = (set ?? []).find(
    (a) => a.Ipv6CidrBlock && (a.Ipv6CidrBlockState?.State ?? 'associated') === 'associated',
  );
  return block?.Ipv6CidrBlock ? { ipv6Cidr: formatIpv6Cidr(parseIpv6Cidr(block.Ipv6CidrBlock)) } : {};
}

/** The ENI's IPv6 members in canonical form (lease keys compare by it), or none when it holds no IPv6. */
function ipv6Members(n: {
  Ipv6Addresses?: readonly { Ipv6Address?: string | undefined }[] | undefined;
  Ipv6Prefixes?: readonly { Ipv6Prefix?: string | undefined }[] | undefined;
}): { ipv6Addresses?: string[]; ipv6Prefixes?: string[] } {
  const addresses = (n.Ipv6Addresses ?? []).flatMap((a) => (a.Ipv6Address ? [canonicalIpv6(a.Ipv6Address)] : []));
  const prefixes = (n.Ipv6Prefixes ?? []).flatMap((p) =>
    p.Ipv6Prefix ? [formatIpv6Cidr(parseIpv6Cidr(p.Ipv6Prefix))] : [],
  );
  return {
    ...(addresses.length > 0 ? { ipv6Addresses: addresses } : {}),
    ...(prefixes.length > 0 ? { ipv6Prefixes: prefixes } : {}),
  };
}
