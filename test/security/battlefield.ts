import { AutoScalingClient } from '@aws-sdk/client-auto-scaling';
import {
  type AttributeValue,
  DeleteItemCommand,
  DynamoDBClient,
  PutItemCommand,
  QueryCommand,
} from '@aws-sdk/client-dynamodb';
import { type LocalCloud, startLocalCloud } from '../../local-cloud/cloud.js';
import type { Ec2Call } from '../../local-cloud/ec2/index.js';
import type { InstanceSession } from '../../local-cloud/iam/endpoint.js';
import { type Deployment, deployControlPlane } from '../../local-cloud/scenario/deploy.js';
import { NodeGroup } from '../../local-cloud/scenario/node-group.js';
import { LightDynamoClient } from '../../shared/dynamo/light-client.js';
import { SdkDynamoApi } from '../../shared/dynamo/sdk-client.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import { A } from '../../shared/lease-store/item-codec.js';

export const TABLE = 'vpc-lease';
const CONTROL_PLANE = { accessKeyId: 'local', secretAccessKey: 'local' };
/** Mutating EC2 actions: a call of one of these that names a victim's ENI, address or instance is an effect. */
const MUTATING = /^(Assign|Unassign|Attach|Detach|Delete|Modify|Create|Reset)/;

/** A simulated node as an attacker or a victim holds it: its IMDS session and clients signed with it. */
export interface SimNode {
  readonly instanceId: string;
  readonly arn: string;
  readonly session: InstanceSession;
  /** The AWS SDK, signed with the node's credentials, through the IAM endpoint; no retries. */
  readonly ddb: DynamoDBClient;
  /** The lease store as the CNI plugin opens it (light client, node credentials, IAM endpoint). */
  readonly store: DynamoLeaseStore;
}

/** What a node owns in EC2 at a moment: its instance, its ENIs and their addresses and prefixes. */
export interface Holdings {
  readonly instanceId: string;
  readonly eniIds: ReadonlySet<string>;
  readonly addresses: ReadonlySet<string>;
  readonly prefixes: ReadonlySet<string>;
}

/**
 * The local cloud with the control plane deployed as the construct deploys it, three nodes launched through
 * Auto Scaling and their lifecycle hooks, every node signing with the credentials its own IMDS issued, and
 * every EC2 call that took effect recorded. Only the control plane's key passes IAM unevaluated.
 */
export class Battlefield {
  readonly ec2Calls: Ec2Call[] = [];
  private holderSeq = 0;

  private constructor(
    readonly cloud: LocalCloud,
    readonly deployment: Deployment,
    /** The control plane's view of the table (for the test's own observations, never for an attack). */
    readonly controlStore: DynamoLeaseStore,
    private readonly controlDdb: DynamoDBClient,
    readonly nodes: readonly SimNode[],
    private readonly closers: (() => unknown)[],
  ) {
    closers.push(cloud.ec2.api.onCall((call) => this.ec2Calls.push(call)));
  }

  /** `region` picks the partition too (cn-north-1 is `aws-cn`): every ARN of the cloud and its IAM carries it. */
  static async start(nodeCount = 3, region?: string): Promise<Battlefield> {
    const cloud = await startLocalCloud({
      ...(region ? { region } : {}),
      timeScale: 0.02,
      leaseTable: TABLE,
      seedNetwork: true,
      iam: { controlPlaneKeys: [CONTROL_PLANE.accessKeyId] },
    });
    const deployment = deployControlPlane(cloud, {
      config: {
        clusterName: 'vpc-lease',
        tableName: TABLE,
        // Excess FREE leases are released at once, so a forged lease tempts the pool-manager on its first run.
        releaseDelayMs: 0,
        reuseWaitMs: 1_000,
        eniMinAgeForGcMs: 0,
        heartbeatTimeoutS: 900,
        logLevel: 'error',
      },
      schedules: [],
    });
    const asg = new AutoScalingClient({
      region: cloud.region,
      endpoint: cloud.endpoints.autoScaling,
      credentials: CONTROL_PLANE,
    });
    const controlDdb = new DynamoDBClient({
      region: cloud.region,
      endpoint: cloud.endpoints.dynamodb,
      credentials: CONTROL_PLANE,
    });
    const controlStore = new DynamoLeaseStore({ api: new SdkDynamoApi(controlDdb), tableName: TABLE });
    const group = new NodeGroup(cloud, asg, controlStore, () => undefined);
    await group.scaleOut(nodeCount, 'm5.large', [cloud.network!.subnetIds[0]!], 900);
    const nodes = [...group.inService].sort().map((instanceId): SimNode => {
      const session = cloud.nodeSession(instanceId);
      const ddb = new DynamoDBClient({
        region: cloud.region,
        endpoint: cloud.endpoints.dynamodb,
        credentials: session.credentials,
        maxAttempts: 1,
      });
      const light = new LightDynamoClient({
        region: cloud.region,
        endpoint: cloud.endpoints.dynamodb,
        credentials: async () => session.credentials,
        timeoutMs: 5_000,
      });
      return {
        instanceId,
        arn: session.instanceArn,
        session,
        ddb,
        store: new DynamoLeaseStore({ api: light, tableName: TABLE }),
      };
    });
    return new Battlefield(cloud, deployment, controlStore, controlDdb, nodes, [
      () => asg.destroy(),
      () => controlDdb.destroy(),
      ...nodes.map((n) => () => n.ddb.destroy()),
    ]);
  }

  get attacker(): SimNode {
    return this.nodes[0]!;
  }

  get victims(): readonly SimNode[] {
    return this.nodes.slice(1);
  }

  /** Every item of a node's partition, raw (forged items included), read with the control plane's key. */
  async partition(arn: string): Promise<Record<string, AttributeValue>[]> {
    const items: Record<string, AttributeValue>[] = [];
    let start: Record<string, AttributeValue> | undefined;
    do {
      const page = await this.controlDdb.send(
        new QueryCommand({
          TableName: TABLE,
          KeyConditionExpression: `${A.pk} = :pk`,
          ExpressionAttributeValues: { ':pk': { S: arn } },
          ConsistentRead: true,
          ...(start ? { ExclusiveStartKey: start } : {}),
        }),
      );
      items.push(...(page.Items ?? []));
      start = page.LastEvaluatedKey;
    } while (start);
    return items;
  }

  /**
   * Puts a partition back as `snapshot` had it, so each attack starts from the same table (its EC2 effects
   * stay: they are what the next check would catch).
   */
  async restorePartition(arn: string, snapshot: readonly Record<string, AttributeValue>[]): Promise<void> {
    const keep = new Set(snapshot.map((i) => i[A.sk]?.S));
    for (const item of await this.partition(arn)) {
      if (keep.has(item[A.sk]?.S)) continue;
      const key = { [A.pk]: item[A.pk]!, [A.sk]: item[A.sk]! };
      await this.controlDdb.send(new DeleteItemCommand({ TableName: TABLE, Key: key }));
    }
    for (const item of snapshot) await this.controlDdb.send(new PutItemCommand({ TableName: TABLE, Item: item }));
  }

  holdings(node: SimNode): Holdings {
    const enis = this.cloud.ec2.api.instanceInterfaces(node.instanceId);
    return {
      instanceId: node.instanceId,
      eniIds: new Set(enis.map((e) => e.eniId)),
      addresses: new Set(enis.flatMap((e) => e.privateIpAddresses)),
      prefixes: new Set(enis.flatMap((e) => e.ipv4Prefixes)),
    };
  }

  /**
   * The control plane's periodic work, as its schedules would run it after an attack; the failures of whole
   * runs (one bad item stopping the reconciler stops it for every node, so those count as an effect).
   */
  async runControlPlane(): Promise<string[]> {
    const failures: string[] = [];
    const run = async (name: string, invoke: () => Promise<unknown>): Promise<void> => {
      try {
        await invoke();
      } catch (err) {
        failures.push(`${name}: ${(err as Error).name}: ${(err as Error).message}`);
      }
    };
    await run('pool-manager', () => this.deployment.invokePoolManager());
    await run('reconciler', () => this.deployment.invokeReconciler());
    await run('pool-manager', () => this.deployment.invokePoolManager());
    return failures;
  }

  /** Mutating EC2 calls from index `since` on that name any of `holdings`' instance, ENIs, addresses or prefixes. */
  mutationsTouching(since: number, holdings: readonly Holdings[]): string[] {
    const touched: string[] = [];
    for (const call of this.ec2Calls.slice(since)) {
      if (!MUTATING.test(call.action)) continue;
      const named = new Set(strings(call.input));
      for (const h of holdings) {
        const hit = [h.instanceId, ...h.eniIds, ...h.addresses, ...h.prefixes].filter((v) => named.has(v));
        if (hit.length > 0) touched.push(`${call.action} on ${hit.join(', ')} (${h.instanceId})`);
      }
    }
    return touched;
  }

  /** A pod ADD and DEL on `node` through the claim path the plugin uses; the error when either fails. */
  async addAndDelete(node: SimNode): Promise<string | undefined> {
    this.holderSeq += 1;
    const holder = {
      containerId: `probe-${this.holderSeq.toString().padStart(6, '0')}`,
      ifName: 'eth0',
      netns: `/var/run/netns/probe-${this.holderSeq}`,
      podNamespace: 'default',
      podName: `probe-${this.holderSeq}`,
    };
    try {
      const lease = await node.store.claim(node.arn, holder, Date.now());
      if (!this.holdings(node).addresses.has(lease.ip))
        return `claimed ${lease.ip}, which EC2 does not assign to ${node.instanceId}`;
      await node.store.release(node.arn, holder, Date.now(), 1_000, lease.ip);
      return undefined;
    } catch (err) {
      return `${(err as Error).name}: ${(err as Error).message}`;
    }
  }

  async close(): Promise<void> {
    for (const c of this.closers.splice(0)) c();
    await this.deployment.stop();
    await this.cloud.close();
  }
}

function strings(value: unknown): string[] {
  if (typeof value === 'string') return [value];
  if (Array.isArray(value)) return value.flatMap(strings);
  if (value && typeof value === 'object') return Object.values(value).flatMap(strings);
  return [];
}
