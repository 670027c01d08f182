import type { InstanceLimits } from '../domain/limits.js';
import { bucketFor, type Ec2Buckets } from './account-buckets.js';
import type { BucketRate } from './gcra.js';
import type {
  AttachEniRequest,
  CreateEniRequest,
  Ec2Eni,
  Ec2Instance,
  Ec2Port,
  Ec2Subnet,
  EniQuery,
  SubnetQuery,
} from './port.js';
import type { RateBudget } from './rate-budget.js';

/** EC2's key for DescribeNetworkInterfaces without filters or without pagination (its own smaller bucket). */
export const DESCRIBE_ENIS_UNPAGINATED = 'DescribeNetworkInterfaces (unfiltered or unpaginated)';

/**
 * The bucket a DescribeNetworkInterfaces call of the SDK adapter draws on, as EC2 keys it: an id list is never
 * paginated (EC2 refuses MaxResults beside it) and a call without any filter is unfiltered, so both take the
 * smaller bucket; a filtered call is paginated by the adapter and takes the standard one.
 */
export function describeEnisBucketKey(query: EniQuery): string {
  const filtered =
    query.filterEniIds !== undefined ||
    query.attachedTo !== undefined ||
    query.attachedToAny !== undefined ||
    (query.subnetIds?.length ?? 0) > 0 ||
    Object.keys(query.tags ?? {}).length > 0;
  return query.eniIds?.length || !filtered ? DESCRIBE_ENIS_UNPAGINATED : 'DescribeNetworkInterfaces';
}

export interface BudgetShare {
  /**
   * Part of each bucket's burst the budget hands out (default 0.8): the rest absorbs the jitter between a
   * token's scheduled start and the request's arrival at EC2, and leaves room for other callers.
   */
  readonly bucketShare?: number;
  /** Part of each refill rate (default 1: vpc-lease is the account's main caller of these actions). */
  readonly rateShare?: number;
  /**
   * Multiplies the refill rates: a local cloud running at `timeScale` refills 1/timeScale times faster in
   * real time (default 1, AWS's pace).
   */
  readonly rateScale?: number;
}

/**
 * The budget's figure for a bucket key: the account's bucket (its own raised figures, else AWS's published
 * ones), scaled by the shares.
 */
export function ec2BucketRates(share: BudgetShare = {}, accountBuckets: Ec2Buckets = {}): (key: string) => BucketRate {
  const bucketShare = share.bucketShare ?? 0.8;
  const rateFactor = (share.rateShare ?? 1) * (share.rateScale ?? 1);
  return (key) => {
    const figure = bucketFor(key, accountBuckets);
    const bucket = Math.max(1, Math.floor(figure.bucket * bucketShare));
    return {
      bucket,
      refillPerSecond: figure.refillPerSecond * rateFactor,
      heldBackTokens: Math.max(1, figure.bucket - bucket),
    };
  };
}

/**
 * The EC2 port with every call first taking its token from the shared budget (rate-budget.ts), keyed as EC2
 * keys its buckets. DescribeInstanceTypes is not budgeted: the adapter caches it for the container's life.
 * A multi-page call takes one token for its first page.
 */
export class BudgetedEc2 implements Ec2Port {
  constructor(
    readonly inner: Ec2Port,
    readonly budget: RateBudget,
  ) {}

  private async take<T>(key: string, call: () => Promise<T>, action = key): Promise<T> {
    await this.budget.acquire(key, action);
    return call();
  }

  describeInstance(instanceId: string): Promise<Ec2Instance | undefined> {
    return this.take('DescribeInstances', () => this.inner.describeInstance(instanceId));
  }
  describeInstances(instanceIds: readonly string[]): Promise<Map<string, Ec2Instance>> {
    return this.take('DescribeInstances', () => this.inner.describeInstances(instanceIds));
  }
  describeInstanceStates(instanceIds: readonly string[]): Promise<Map<string, string>> {
    return this.take('DescribeInstances', () => this.inner.describeInstanceStates(instanceIds));
  }
  describeInstanceLimits(instanceType: string): Promise<InstanceLimits> {
    return this.inner.describeInstanceLimits(instanceType);
  }
  describeSubnets(query: SubnetQuery): Promise<Ec2Subnet[]> {
    return this.take('DescribeSubnets', () => this.inner.describeSubnets(query));
  }
  describeNetworkInterfaces(query: EniQuery): Promise<Ec2Eni[]> {
    if (query.filterEniIds?.length === 0 || query.attachedToAny?.length === 0)
      return this.inner.describeNetworkInterfaces(query);
    return this.take(
      describeEnisBucketKey(query),
      () => this.inner.describeNetworkInterfaces(query),
      'DescribeNetworkInterfaces',
    );
  }
  createNetworkInterface(request: CreateEniRequest): Promise<Ec2Eni> {
    return this.take('CreateNetworkInterface', () => this.inner.createNetworkInterface(request));
  }
  attachNetworkInterface(request: AttachEniRequest): Promise<string> {
    return this.take('AttachNetworkInterface', () => this.inner.attachNetworkInterface(request));
  }
  setDeleteOnTermination(eniId: string, attachmentId: string, deleteOnTermination: boolean): Promise<void> {
    return this.take('ModifyNetworkInterfaceAttribute', () =>
      this.inner.setDeleteOnTermination(eniId, attachmentId, deleteOnTermination),
    );
  }
  detachNetworkInterface(attachmentId: string, force?: boolean): Promise<void> {
    return this.take('DetachNetworkInterface', () => this.inner.detachNetworkInterface(attachmentId, force));
  }
  deleteNetworkInterface(eniId: string): Promise<void> {
    return this.take('DeleteNetworkInterface', () => this.inner.deleteNetworkInterface(eniId));
  }
  assignPrivateIpAddresses(
    eniId: string,
    request: { readonly ipCount?: number; readonly prefixCount?: number },
  ): Promise<{ ips: string[]; prefixes: string[] }> {
    return this.take('AssignPrivateIpAddresses', () => this.inner.assignPrivateIpAddresses(eniId, request));
  }
  unassignPrivateIpAddresses(
    eniId: string,
    request: { readonly ips?: readonly string[]; readonly prefixes?: readonly string[] },
  ): Promise<void> {
    return this.take('UnassignPrivateIpAddresses', () => this.inner.unassignPrivateIpAddresses(eniId, request));
  }
  createTags(resourceIds: readonly string[], tags: Readonly<Record<string, string>>): Promise<void> {
    if (resourceIds.length === 0) return this.inner.createTags(resourceIds, tags);
    return this.take('CreateTags', () => this.inner.createTags(resourceIds, tags));
  }
  deleteTags(resourceIds: readonly string[], keys: readonly string[]): Promise<void> {
    if (resourceIds.length === 0) return this.inner.deleteTags(resourceIds, keys);
    return this.take('DeleteTags', () => this.inner.deleteTags(resourceIds, keys));
  }
}
