import { mkdirSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { CreateTableCommand, DescribeTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import dynalite from 'dynalite';
import { partitionIdOfRegion } from '../shared/domain/partition.js';
import { createTableInput } from '../shared/lease-store/table.js';
import type { Logger } from '../shared/log.js';
import { silentLogger } from '../shared/log.js';
import { sleepMs } from '../shared/sleep.js';
import type { AutoScalingSimulatorHandle } from './autoscaling/index.js';
import { startAutoScalingSimulator } from './autoscaling/index.js';
import type { LaunchTemplateSpec } from './autoscaling/model.js';
import type { Ec2SimulatorOptions, Ec2SimulatorServer } from './ec2/index.js';
import { startEc2Simulator } from './ec2/index.js';
import { EventBus } from './events/bus.js';
import { instanceStateChangeEvent } from './events/event.js';
import type { EventPattern } from './events/pattern.js';
import type { SimScheduler } from './events/scheduler.js';
import { createScheduler } from './events/scheduler.js';
import { queueTarget } from './events/targets.js';
import { IamEndpoint, type InstanceSession } from './iam/endpoint.js';
import { synthesizedNodePolicy } from './iam/synthesize-node-policy.js';
import { ImdsService } from './imds/service.js';
import type { EventSourceMappingOptions } from './sqs/event-source-mapping.js';
import { EventSourceMapping } from './sqs/event-source-mapping.js';
import type { SqsSimulatorHandle } from './sqs/index.js';
import { startSqsSimulator } from './sqs/index.js';
import type { Queue } from './sqs/queue.js';

export interface LocalCloudOptions {
  /** Keeps DynamoDB data (LevelDB) under `<dataDir>/dynamodb`; in memory when absent. */
  readonly dataDir?: string;
  /** Seeds the EC2 simulator's ids and choices and the queues' injected duplicates. Default 1. */
  readonly seed?: number;
  /** Real ms per simulated ms for every part (see SimScheduler). Default 1: AWS's own pace. */
  readonly timeScale?: number;
  readonly region?: string;
  readonly accountId?: string;
  /** Passed through to the EC2 simulator (delays, throttling, latency, instance types). */
  readonly ec2?: Omit<Ec2SimulatorOptions, 'region' | 'accountId' | 'seed' | 'timeScale'>;
  readonly sqs?: { readonly duplicateRate?: number };
  readonly autoScaling?: {
    readonly defaultInstanceType?: string;
    readonly resolveInstanceType?: (template: LaunchTemplateSpec) => string | undefined;
  };
  /** Creates the lease table under this name (from shared/lease-store/table.ts) if it does not exist. */
  readonly leaseTable?: string;
  /** Seeds a VPC (10.0.0.0/16) with one /20 subnet in each of three zones, for a ready-to-use cloud. */
  readonly seedNetwork?: boolean;
  /**
   * The IAM-enforcing DynamoDB endpoint. `controlPlaneKeys` are the access keys passed through unevaluated
   * (default `unissued`: any key IMDS did not issue and not shaped like a session key); a list makes every
   * other key UnrecognizedClient, as in AWS.
   */
  readonly iam?: { readonly controlPlaneKeys?: 'unissued' | readonly string[] };
  /** Fixed ports (0 or absent = random), e.g. for `npm run local`. */
  readonly ports?: {
    readonly ec2?: number;
    readonly autoScaling?: number;
    readonly sqs?: number;
    readonly dynamodb?: number;
  };
  readonly log?: Logger;
}

export interface LocalCloudEndpoints {
  readonly ec2: string;
  readonly autoScaling: string;
  readonly sqs: string;
  /** The IAM-enforcing endpoint: what nodes and the control plane use. */
  readonly dynamodb: string;
  /** dynalite itself, without IAM (the table's setup, diagnostics). */
  readonly dynamodbDirect: string;
}

export interface SeededNetwork {
  readonly vpcId: string;
  readonly subnetIds: readonly string[];
}

export interface QueueWithDlq {
  readonly queue: Queue;
  readonly dlq: Queue;
}

export interface LocalCloud {
  readonly region: string;
  /** The partition of `region` (`aws-cn` for cn-north-1): every ARN the local cloud builds carries it. */
  readonly partition: string;
  readonly accountId: string;
  readonly endpoints: LocalCloudEndpoints;
  /** AWS_ENDPOINT_URL_<SERVICE>, AWS_REGION and dummy credentials: what any SDK or CLI needs. */
  readonly env: Readonly<Record<string, string>>;
  readonly scheduler: SimScheduler;
  readonly ec2: Ec2SimulatorServer;
  readonly autoScaling: AutoScalingSimulatorHandle;
  readonly sqs: SqsSimulatorHandle;
  readonly bus: EventBus;
  readonly imds: ImdsService;
  /** The IAM endpoint in front of dynalite: sessions, decisions, the node policy it enforces. */
  readonly iam: IamEndpoint;
  /** The role session an instance's IMDS hands out (issued on first use), for callers that skip IMDS. */
  nodeSession(instanceId: string): InstanceSession;
  readonly network: SeededNetwork | undefined;
  createQueue(name: string, attributes?: Readonly<Record<string, string>>): Queue;
  /** A work queue whose RedrivePolicy sends a message to `<name>-dlq` after `maxReceiveCount` receives. */
  createQueueWithDlq(name: string, options?: { maxReceiveCount?: number; visibilityTimeoutS?: number }): QueueWithDlq;
  /** An EventBridge rule on the default bus delivering matching events into the queues. */
  putRule(name: string, eventPattern: EventPattern, queues: readonly Queue[]): void;
  /** Lambda's SQS trigger: polls `queue` and invokes `handler`; stopped by `close()`. */
  createEventSourceMapping(
    queue: Queue,
    handler: EventSourceMappingOptions['handler'],
    options?: Omit<EventSourceMappingOptions, 'queue' | 'handler' | 'scheduler' | 'region' | 'accountId'>,
  ): EventSourceMapping;
  close(): Promise<void>;
}

interface DynamoServer {
  readonly endpoint: string;
  close(): Promise<void>;
}

async function startDynamo(path: string | undefined, port: number): Promise<DynamoServer> {
  const server: Server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0, ...(path ? { path } : {}) });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  const address = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${address.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

async function ensureTable(endpoint: string, region: string, tableName: string): Promise<void> {
  const client = new DynamoDBClient({
    endpoint,
    region,
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  });
  try {
    try {
      await client.send(new CreateTableCommand(createTableInput(tableName)));
    } catch (err) {
      // A table kept on disk from an earlier run is fine.
      if ((err as { name?: string }).name !== 'ResourceInUseException') throw err;
    }
    for (let attempt = 0; attempt < 200; attempt += 1) {
      const out = await client.send(new DescribeTableCommand({ TableName: tableName }));
      if (out.Table?.TableStatus === 'ACTIVE') return;
      await sleepMs(10);
    }
    throw new Error(`failed to create table ${tableName}: still not ACTIVE`);
  } finally {
    client.destroy();
  }
}

/**
 * Starts the whole local cloud on 127.0.0.1: dynalite, EC2, Auto Scaling, SQS (+ the EventBridge bus) and
 * IMDS, wired as in AWS — Auto Scaling launches through EC2 and emits lifecycle events to the bus, EC2 state
 * changes go to the bus, rules route events into queues, event source mappings feed handlers.
 * Every part started is closed by `close()`, also when a later part fails to start.
 */
export async function startLocalCloud(options: LocalCloudOptions = {}): Promise<LocalCloud> {
  const region = options.region ?? 'us-east-1';
  const accountId = options.accountId ?? '123456789012';
  const seed = options.seed ?? 1;
  const timeScale = options.timeScale ?? 1;
  const log = options.log ?? silentLogger;
  const scheduler = createScheduler({ timeScale });
  const bus = new EventBus(log.child({ part: 'events' }));
  const closers: (() => Promise<void> | void)[] = [() => scheduler.close()];
  const mappings: EventSourceMapping[] = [];
  const closeAll = async (): Promise<void> => {
    await Promise.all(mappings.splice(0).map((m) => m.stop()));
    for (const close of closers.splice(0).reverse()) {
      try {
        await close();
      } catch (err) {
        log.warn('failed to close a local cloud part', { err });
      }
    }
  };
  try {
    const dynamoPath = options.dataDir ? join(options.dataDir, 'dynamodb') : undefined;
    if (dynamoPath) mkdirSync(dynamoPath, { recursive: true });
    const dynamo = await startDynamo(dynamoPath, 0);
    closers.push(() => dynamo.close());
    if (options.leaseTable) await ensureTable(dynamo.endpoint, region, options.leaseTable);
    let network: SeededNetwork | undefined;
    const iam = new IamEndpoint({
      target: dynamo.endpoint,
      region,
      accountId,
      policy: await synthesizedNodePolicy(),
      tableName: options.leaseTable,
      clusterVpcId: () => network?.vpcId,
      controlPlaneKeys: options.iam?.controlPlaneKeys ?? 'unissued',
    });
    await iam.start(options.ports?.dynamodb ?? 0);
    closers.push(() => iam.close());

    const ec2 = await startEc2Simulator({
      ...options.ec2,
      region,
      accountId,
      seed,
      timeScale,
      ...(options.ports?.ec2 ? { port: options.ports.ec2 } : {}),
    });
    closers.push(() => ec2.close());
    const unsubscribe = ec2.api.onInstanceStateChange((change) =>
      bus.put(instanceStateChangeEvent(change, region, accountId)),
    );
    closers.push(unsubscribe);

    const sqs = await startSqsSimulator({
      scheduler,
      region,
      accountId,
      seed,
      ...(options.sqs?.duplicateRate !== undefined ? { duplicateRate: options.sqs.duplicateRate } : {}),
      ...(options.ports?.sqs ? { port: options.ports.sqs } : {}),
    });
    closers.push(() => sqs.close());

    const autoScaling = await startAutoScalingSimulator({
      ec2: ec2.api,
      scheduler,
      emit: (event) => bus.put(event),
      notify: (targetArn, body) => sqs.engine.queueByArn(targetArn)?.send({ body }),
      log: log.child({ part: 'autoscaling' }),
      ...options.autoScaling,
      ...(options.ports?.autoScaling ? { port: options.ports.autoScaling } : {}),
    });
    closers.push(() => autoScaling.close());

    const sessionFor = (instance: { instanceId: string; vpcId: string }, roleName = 'vpc-lease-node') =>
      iam.issue(instance.instanceId, instance.vpcId, roleName);
    const imds = new ImdsService({
      ec2: ec2.api,
      scheduler,
      sessionFor: (instance, roleName) => sessionFor(instance, roleName).credentials,
    });
    closers.push(() => imds.close());

    if (options.seedNetwork) {
      const vpc = ec2.admin.seedVpc('10.0.0.0/16');
      const subnetIds = ['a', 'b', 'c'].map(
        (zone, i) => ec2.admin.seedSubnet(vpc.vpcId, `10.0.${i * 16}.0/20`, `${region}${zone}`).subnetId,
      );
      network = { vpcId: vpc.vpcId, subnetIds };
    }

    const endpoints: LocalCloudEndpoints = {
      ec2: ec2.endpoint,
      autoScaling: autoScaling.endpoint,
      sqs: sqs.endpoint,
      dynamodb: iam.endpoint,
      dynamodbDirect: dynamo.endpoint,
    };
    const createQueue = (name: string, attributes: Readonly<Record<string, string>> = {}): Queue =>
      sqs.engine.createQueue(name, attributes);
    return {
      region,
      partition: partitionIdOfRegion(region),
      accountId,
      endpoints,
      env: {
        AWS_ENDPOINT_URL_EC2: endpoints.ec2,
        AWS_ENDPOINT_URL_AUTO_SCALING: endpoints.autoScaling,
        AWS_ENDPOINT_URL_SQS: endpoints.sqs,
        AWS_ENDPOINT_URL_DYNAMODB: endpoints.dynamodb,
        AWS_REGION: region,
        AWS_DEFAULT_REGION: region,
        AWS_ACCESS_KEY_ID: 'local',
        AWS_SECRET_ACCESS_KEY: 'local',
      },
      scheduler,
      ec2,
      autoScaling,
      sqs,
      bus,
      imds,
      iam,
      nodeSession: (instanceId) => {
        const instance = ec2.api.getInstance(instanceId);
        if (!instance) throw new Error(`failed to issue a role session for ${instanceId}: no such instance`);
        return sessionFor(instance);
      },
      network,
      createQueue,
      createQueueWithDlq: (name, queueOptions = {}) => {
        const dlq = createQueue(`${name}-dlq`, { MessageRetentionPeriod: '1209600' });
        const queue = createQueue(name, {
          VisibilityTimeout: String(queueOptions.visibilityTimeoutS ?? 30),
          RedrivePolicy: JSON.stringify({
            deadLetterTargetArn: dlq.arn,
            maxReceiveCount: queueOptions.maxReceiveCount ?? 5,
          }),
        });
        return { queue, dlq };
      },
      putRule: (name, eventPattern, queues) =>
        bus.putRule({ name, eventPattern, targets: queues.map((q) => queueTarget(q)) }),
      createEventSourceMapping: (queue, handler, mappingOptions = {}) => {
        const mapping = new EventSourceMapping({
          ...mappingOptions,
          queue,
          handler,
          scheduler,
          region,
          accountId,
          log: mappingOptions.log ?? log.child({ part: 'event-source-mapping' }),
        });
        mappings.push(mapping);
        return mapping;
      },
      close: closeAll,
    };
  } catch (err) {
    await closeAll();
    throw err;
  }
}
