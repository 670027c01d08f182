import { errorMessage } from '../errors.js';
import type { Logger } from '../log.js';
import type { Ec2Eni, Ec2Instance, Ec2Port } from './port.js';

/** Each record's view → the container's port behind it (see `containerPortOf`). */
const innerOf = new WeakMap<Ec2Port, Ec2Port>();

/** Port methods that change nothing in EC2: after any other, a batch's earlier answers may be stale for the record. */
const READS = new Set([
  'describeInstance',
  'describeInstances',
  'describeInstanceStates',
  'describeInstanceLimits',
  'describeSubnets',
  'describeNetworkInterfaces',
]);

/**
 * The ENIs attached to a batch's launching instances (those DescribeInstances shows with a device index ≥ 1,
 * the ones adoption verifies), described by ONE filtered call the first time a record asks, and shared by
 * every record of the batch: at EC2's Describe bucket (100, refilling 20/s) a call per launch made 1,000
 * launches queue behind each other. A failed call is not shared: each record then describes its own.
 */
export class BatchAttachedEnis {
  private answer: Promise<ReadonlyMap<string, Ec2Eni[]> | undefined> | undefined;

  private constructor(
    private readonly ec2: Ec2Port,
    private readonly instanceIds: ReadonlySet<string>,
    private readonly logger: Logger,
  ) {}

  /** Undefined when no instance of the batch has an ENI beyond the boot one (nothing to adopt, no call). */
  static of(
    ec2: Ec2Port,
    instances: ReadonlyMap<string, Ec2Instance | undefined>,
    logger: Logger,
  ): BatchAttachedEnis | undefined {
    const ids = [...instances]
      .filter(([, i]) => i?.interfaces.some((n) => (n.attachment?.deviceIndex ?? 0) >= 1))
      .map(([id]) => id);
    return ids.length > 0 ? new BatchAttachedEnis(containerPortOf(ec2), new Set(ids), logger) : undefined;
  }

  /** What the batch's call saw attached to `instanceId`; undefined when it was not asked for or the call failed. */
  async attachedTo(instanceId: string): Promise<Ec2Eni[] | undefined> {
    if (!this.instanceIds.has(instanceId)) return undefined;
    this.answer ??= this.describe();
    const answer = await this.answer;
    return answer ? [...(answer.get(instanceId) ?? [])] : undefined;
  }

  private async describe(): Promise<ReadonlyMap<string, Ec2Eni[]> | undefined> {
    const ids = [...this.instanceIds];
    try {
      const enis = await this.ec2.describeNetworkInterfaces({ attachedToAny: ids });
      const byInstance = new Map<string, Ec2Eni[]>(ids.map((id) => [id, []]));
      for (const eni of enis) byInstance.get(eni.attachment?.instanceId ?? '')?.push(eni);
      return byInstance;
    } catch (err) {
      this.logger.warn("the batch's DescribeNetworkInterfaces failed; each launch describes its own ENIs", {
        instances: ids.length,
        err: errorMessage(err),
      });
      return undefined;
    }
  }
}

/**
 * One record's view of the EC2 port with its instance already described (by the batch's single
 * DescribeInstances): the first `describeInstance` of that instance is answered from it, as long as it comes
 * before any other EC2 call of the record — after one, EC2 may have changed, so every call goes through.
 * Likewise its first `describeNetworkInterfaces({ attachedTo })` is answered by the batch's shared call
 * (`attached`), as long as the record has changed nothing in EC2 before it.
 */
export function withPrefetchedInstance(
  inner: Ec2Port,
  instanceId: string,
  instance: Ec2Instance | undefined,
  attached?: BatchAttachedEnis,
): Ec2Port {
  let fresh = true;
  let enisFresh = attached !== undefined;
  const view = new Proxy(inner, {
    get(target, property) {
      const value = Reflect.get(target, property, target) as unknown;
      if (typeof value !== 'function') return value;
      if (property === 'describeInstance')
        return (id: string) => {
          if (fresh && id === instanceId) {
            fresh = false;
            return Promise.resolve(instance);
          }
          fresh = false;
          return target.describeInstance(id);
        };
      if (property === 'describeNetworkInterfaces')
        return async (query: Parameters<Ec2Port['describeNetworkInterfaces']>[0]) => {
          fresh = false;
          const mine = enisFresh && attached && Object.keys(query).length === 1 && query.attachedTo === instanceId;
          enisFresh = false;
          return (mine ? await attached.attachedTo(instanceId) : undefined) ?? target.describeNetworkInterfaces(query);
        };
      return (...args: unknown[]) => {
        fresh = false;
        if (!READS.has(String(property))) enisFresh = false;
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  innerOf.set(view, containerPortOf(inner));
  return view;
}

/**
 * The port a record's view wraps, or the port itself: what a cache meant to last for the container's life
 * must be keyed on, since every record gets a new view (keyed on the view, it would miss on every record).
 */
export function containerPortOf(ec2: Ec2Port): Ec2Port {
  return innerOf.get(ec2) ?? ec2;
}
