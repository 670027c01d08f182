import {
  CreateTagsCommand,
  DeleteTagsCommand,
  DescribeInstancesCommand,
  type DescribeInstancesCommandOutput,
} from '@aws-sdk/client-ec2';
import { toEc2ApiError } from '../ec2/errors.js';
import type { Ec2Port } from '../ec2/port.js';
import type { SdkEc2 } from '../ec2/sdk-ec2.js';
import type { Metrics } from '../metrics.js';

/**
 * The EC2 operations the reconciler needs, narrower than Ec2Port in one way (no create/attach/assign) and
 * wider in two: tags for the two-pass mark, and instance states in bulk (one call per 200 instances instead
 * of one per node). Proposed for shared/ec2/port.ts: `createTags`, `deleteTags`, `describeInstanceStates`.
 */
export interface ReconcileEc2 extends Pick<Ec2Port, 'describeNetworkInterfaces' | 'deleteNetworkInterface'> {
  createTags(resourceIds: readonly string[], tags: Readonly<Record<string, string>>): Promise<void>;
  deleteTags(resourceIds: readonly string[], keys: readonly string[]): Promise<void>;
  /** instanceId → state name for every instance EC2 knows; unknown ids are simply absent. */
  describeInstanceStates(instanceIds: readonly string[]): Promise<Map<string, string>>;
}

/** DescribeInstances takes at most 200 values per filter. */
const INSTANCE_FILTER_BATCH = 200;

/** ReconcileEc2 over the lifecycle's SDK adapter (its client, retry mode and counting) plus three calls. */
export class SdkReconcileEc2 implements ReconcileEc2 {
  constructor(
    private readonly ec2: SdkEc2,
    private readonly metrics?: Metrics,
  ) {}

  describeNetworkInterfaces: ReconcileEc2['describeNetworkInterfaces'] = (query) =>
    this.ec2.describeNetworkInterfaces(query);

  deleteNetworkInterface: ReconcileEc2['deleteNetworkInterface'] = (eniId) => this.ec2.deleteNetworkInterface(eniId);

  async createTags(resourceIds: readonly string[], tags: Readonly<Record<string, string>>): Promise<void> {
    if (resourceIds.length === 0) return;
    await this.call('CreateTags', () =>
      this.ec2.client.send(
        new CreateTagsCommand({
          Resources: [...resourceIds],
          Tags: Object.entries(tags).map(([Key, Value]) => ({ Key, Value })),
        }),
      ),
    );
  }

  async deleteTags(resourceIds: readonly string[], keys: readonly string[]): Promise<void> {
    if (resourceIds.length === 0) return;
    await this.call('DeleteTags', () =>
      this.ec2.client.send(new DeleteTagsCommand({ Resources: [...resourceIds], Tags: keys.map((Key) => ({ Key })) })),
    );
  }

  async describeInstanceStates(instanceIds: readonly string[]): Promise<Map<string, string>> {
    const states = new Map<string, string>();
    const unique = [...new Set(instanceIds)];
    for (let i = 0; i < unique.length; i += INSTANCE_FILTER_BATCH) {
      // A filter, not InstanceIds: one unknown id in InstanceIds fails the whole call with NotFound.
      const ids = unique.slice(i, i + INSTANCE_FILTER_BATCH);
      let nextToken: string | undefined;
      do {
        const out: DescribeInstancesCommandOutput = await this.call('DescribeInstances', () =>
          this.ec2.client.send(
            new DescribeInstancesCommand({
              Filters: [{ Name: 'instance-id', Values: ids }],
              MaxResults: 1000,
              ...(nextToken ? { NextToken: nextToken } : {}),
            }),
          ),
        );
        for (const r of out.Reservations ?? [])
          for (const inst of r.Instances ?? [])
            if (inst.InstanceId) states.set(inst.InstanceId, inst.State?.Name ?? 'unknown');
        nextToken = out.NextToken;
      } while (nextToken);
    }
    return states;
  }

  private async call<T>(action: string, send: () => Promise<T>): Promise<T> {
    this.metrics?.add('Ec2Calls', { Action: action });
    try {
      return await send();
    } catch (err) {
      const classified = toEc2ApiError(action, err);
      this.metrics?.add('Ec2Errors', { Action: action, Kind: classified.kind });
      throw classified;
    }
  }
}
