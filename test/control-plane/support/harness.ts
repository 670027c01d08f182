import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { EC2ClientConfig } from '@aws-sdk/client-ec2';
import { EC2Client } from '@aws-sdk/client-ec2';
import {
  type Ec2SimulatorOptions,
  type Ec2SimulatorServer,
  startEc2Simulator,
} from '../../../local-cloud/ec2/index.js';
import { type Clock, ManualClock, systemClock } from '../../../shared/clock.js';
import { type ControlPlaneConfig, parseControlPlaneConfig } from '../../../shared/config/control-plane.js';
import { SdkDynamoApi } from '../../../shared/dynamo/sdk-client.js';
import { EC2_CLIENT_DEFAULTS, SdkEc2 } from '../../../shared/ec2/sdk-ec2.js';
import { checkInvariants, type InvariantReport } from '../../../shared/invariants/checker.js';
import { DynamoLeaseStore } from '../../../shared/lease-store/dynamo-lease-store.js';
import { ensureTable } from '../../../shared/lease-store/ensure-table.js';
import type { LifecycleDeps, RetryPolicy } from '../../../shared/lifecycle/deps.js';
import { parseLifecycleEvent } from '../../../shared/lifecycle/events.js';
import { createLifecycleRecordHandler } from '../../../shared/lifecycle/record-handler.js';
import { createLogger, type Logger, silentLogger } from '../../../shared/log.js';
import { Metrics } from '../../../shared/metrics.js';
import type { Requeue } from '../../../shared/queue/requeue.js';
import { type DynaliteHandle, startDynalite } from '../../support/dynalite.js';
import { CrashSwitch, crashable } from './crash.js';
import { RecordingAutoScaling } from './recording-autoscaling.js';

export const REGION = 'us-east-1';
export const ACCOUNT = '123456789012';
export const CREDENTIALS = { accessKeyId: 'test', secretAccessKey: 'test' };

/** Collects re-enqueued bodies instead of sending them, so a test replays them in order without waiting. */
export class CollectingRequeue implements Requeue {
  readonly queued: { body: string; delayS: number }[] = [];
  async requeue(body: string, delayS: number): Promise<void> {
    this.queued.push({ body, delayS });
  }
}

export interface HarnessOptions {
  readonly config?: Partial<Record<keyof ControlPlaneConfig, unknown>>;
  readonly ec2?: Ec2SimulatorOptions;
  readonly ec2Client?: EC2ClientConfig;
  readonly retry?: RetryPolicy;
  readonly logger?: Logger;
}

/**
 * The lifecycle executors against the real EC2 simulator (through the real SDK client) and dynalite (through
 * the real DynamoDB lease store); Auto Scaling and the queue are recorded so a test can drive events step by
 * step, inject crashes and replay re-enqueued work. The local-cloud suites cover the real queue path.
 */
export class Harness {
  config: ControlPlaneConfig;
  readonly metrics: Metrics;
  readonly ec2: SdkEc2;
  readonly store: DynamoLeaseStore;
  readonly autoScaling = new RecordingAutoScaling();
  readonly requeue = new CollectingRequeue();
  clock: Clock = systemClock;
  vpcId = '';
  subnetId = '';

  private constructor(
    readonly sim: Ec2SimulatorServer,
    readonly dynamo: DynaliteHandle,
    private readonly options: HarnessOptions,
  ) {
    this.config = parseControlPlaneConfig({ tableName: 'leases', clusterName: 'test', ...options.config });
    this.metrics = new Metrics(silentLogger, 'test');
    this.ec2 = new SdkEc2({
      metrics: this.metrics,
      client: new EC2Client({
        ...EC2_CLIENT_DEFAULTS,
        region: REGION,
        endpoint: sim.endpoint,
        credentials: CREDENTIALS,
        ...options.ec2Client,
      }),
    });
    const dynamoClient = new DynamoDBClient({ region: REGION, endpoint: dynamo.endpoint, credentials: CREDENTIALS });
    this.store = new DynamoLeaseStore({ api: new SdkDynamoApi(dynamoClient), tableName: this.config.tableName });
  }

  static async start(options: HarnessOptions = {}): Promise<Harness> {
    const [sim, dynamo] = await Promise.all([
      startEc2Simulator({ region: REGION, accountId: ACCOUNT, ...options.ec2 }),
      startDynalite(),
    ]);
    const h = new Harness(sim, dynamo, options);
    await ensureTable(
      new DynamoDBClient({ region: REGION, endpoint: dynamo.endpoint, credentials: CREDENTIALS }),
      h.config.tableName,
    );
    const vpc = sim.admin.seedVpc('10.0.0.0/16');
    h.vpcId = vpc.vpcId;
    h.subnetId = sim.admin.seedSubnet(vpc.vpcId, '10.0.0.0/22', `${REGION}a`).subnetId;
    return h;
  }

  /** Replaces the configuration (e.g. with ids of subnets seeded after start). */
  configure(config: Partial<Record<keyof ControlPlaneConfig, unknown>>): void {
    this.config = parseControlPlaneConfig({
      tableName: 'leases',
      clusterName: 'test',
      ...this.options.config,
      ...config,
    });
  }

  async close(): Promise<void> {
    this.ec2.client.destroy();
    await Promise.all([this.sim.close(), this.dynamo.close()]);
  }

  /**
   * Deps for one invocation; with a crash switch, every port dies together once it trips. The switch counts
   * EC2 calls, or with `countAll` every port's (a crash after any await of the handler).
   */
  deps(crash?: CrashSwitch, overrides: Partial<LifecycleDeps> = {}, countAll = false): LifecycleDeps {
    const sw = crash ?? new CrashSwitch();
    return {
      ec2: crashable(this.ec2, sw, true, 'ec2'),
      store: crashable(this.store, sw, countAll, 'store'),
      autoScaling: crashable(this.autoScaling, sw, countAll, 'autoScaling'),
      requeue: crashable(this.requeue, sw, countAll, 'requeue'),
      config: this.config,
      clock: this.clock,
      logger: this.options.logger ?? silentLogger,
      metrics: this.metrics,
      retry: this.options.retry ?? { maxWaitS: 600, attachingDelayS: 1, backoffBaseS: 2, backoffMaxS: 60 },
      random: () => 0.5,
      ...overrides,
    };
  }

  launchInstance(instanceType: string, subnetId = this.subnetId): string {
    return this.sim.api.launchInstance({ instanceType, subnetId }).instanceId;
  }

  /**
   * Runs `body` through the record handler, then every re-enqueued body in order until none is left.
   * `crashAt` trips the crash switch on the first invocation only (the redelivery runs clean). Returns the
   * number of invocations it took.
   */
  async drive(
    body: string,
    options: { crashAt?: number; maxInvocations?: number; countAll?: boolean } = {},
  ): Promise<number> {
    const pending = [body];
    let invocations = 0;
    let first = true;
    while (pending.length > 0) {
      invocations += 1;
      if (invocations > (options.maxInvocations ?? 60)) throw new Error('the event never settled');
      const next = pending.shift()!;
      const sw = new CrashSwitch(first ? options.crashAt : undefined);
      first = false;
      const before = this.requeue.queued.length;
      try {
        await createLifecycleRecordHandler(this.deps(sw, {}, options.countAll))(next);
      } catch (err) {
        // A failed record is redelivered by SQS with the same body.
        if (!sw.crashed) throw err;
        pending.unshift(next);
        continue;
      }
      for (const q of this.requeue.queued.slice(before)) pending.push(q.body);
      // Attachments progress in simulated time; give the simulator's timers a turn.
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    return invocations;
  }

  async check(nowMs = Date.now()): Promise<InvariantReport> {
    return checkInvariants(this.ec2, this.store, {
      clusterName: this.config.clusterName,
      minLeases: this.config.minLeases,
      nowMs,
      maxUnattachedAgeMs: 0,
      maxProvisioningMs: 60_000,
    });
  }

  instanceArnOf(instanceId: string): string {
    return `arn:aws:ec2:${REGION}:${ACCOUNT}:instance/${instanceId}`;
  }

  /** How many EC2 calls (SDK commands) of each action the adapter made. */
  callsByAction(): Record<string, number> {
    return this.metrics.totalsBy('Ec2Calls', 'Action');
  }
}

export function eventInstanceId(body: string): string {
  const e = parseLifecycleEvent(body);
  return e.kind === 'ignored' ? '' : e.instanceId;
}

export { createLogger, ManualClock };
