import type { SQSEvent } from 'aws-lambda';
import { lifecycleDepsFromEnv } from '../../../lambdas/instance-lifecycle/deps.js';
import { LAUNCHING, TERMINATING } from '../../../local-cloud/autoscaling/simulator.js';
import { type LocalCloud, type LocalCloudOptions, startLocalCloud } from '../../../local-cloud/cloud.js';
import { HOOKLESS_LAUNCH_PATTERN } from '../../../local-cloud/events/lifecycle-rules.js';
import type { EventSourceMapping } from '../../../local-cloud/sqs/event-source-mapping.js';
import type { Queue } from '../../../local-cloud/sqs/queue.js';
import { type ControlPlaneConfig, controlPlaneConfigToEnv } from '../../../shared/config/control-plane.js';
import { localBudgetEnv } from '../../../shared/ec2/budget-env.js';
import { SdkEc2 } from '../../../shared/ec2/sdk-ec2.js';
import { checkInvariants, type InvariantReport } from '../../../shared/invariants/checker.js';
import { createLifecycleBatchHandler } from '../../../shared/lifecycle/batch-handler.js';
import type { LifecycleDeps } from '../../../shared/lifecycle/deps.js';
import {
  LAUNCH_DETAIL_TYPE,
  STATE_CHANGE_DETAIL_TYPE,
  TERMINATE_DETAIL_TYPE,
} from '../../../shared/lifecycle/events.js';
import { createLifecycleRecordHandler } from '../../../shared/lifecycle/record-handler.js';
import { processSqsBatch } from '../../../shared/queue/batch.js';
import { CrashSwitch, crashable } from './crash.js';
import { eventInstanceId } from './harness.js';

export const TABLE = 'vpc-lease';
const DEFAULT_TIME_SCALE = 0.01;

export interface LifecycleCloudOptions {
  readonly timeScale?: number;
  /** The control plane's configuration; a function gets the started cloud (to name subnets seeded in it). */
  readonly config?: Partial<ControlPlaneConfig> | ((cloud: LocalCloud) => Partial<ControlPlaneConfig>);
  readonly ec2?: LocalCloudOptions['ec2'];
  readonly sqs?: LocalCloudOptions['sqs'];
  /** Crash point (EC2 calls) for the first delivery of an instance's first event; undefined = no crash. */
  readonly crashFor?: (instanceId: string) => number | undefined;
  readonly batchSize?: number;
  /** SDK attempts per EC2 call (default the adapter's 5): fewer makes throttling reach the executor. */
  readonly ec2MaxAttempts?: number;
  readonly maxReceiveCount?: number;
  readonly visibilityTimeoutS?: number;
  /** The hooks' heartbeat timeout in simulated seconds (default 7200, AWS's maximum). */
  readonly hookTimeoutS?: number;
  /** Also route EC2 pending/running state changes (the construct's `hooklessLaunches`). */
  readonly hookless?: boolean;
}

/**
 * The whole control-plane path on the local cloud: Auto Scaling (lifecycle hooks) and EC2 state changes →
 * EventBridge rules → SQS queue (+DLQ) → event source mapping → the lifecycle Lambda's handler, whose SDK
 * clients find the simulators through the standard AWS_ENDPOINT_URL_* variables, exactly as deployed.
 */
export class LifecycleCloud {
  private readonly savedEnv = { ...process.env };
  readonly deps: LifecycleDeps;
  readonly queue: Queue;
  readonly dlq: Queue;
  readonly mapping: EventSourceMapping;
  /** Record deliveries per instance. */
  readonly deliveries = new Map<string, number>();
  /** Injected crashes that tripped. */
  crashes = 0;
  /** Deliveries per SQS message id (above 1: a duplicate or a redelivery). */
  readonly messageDeliveries = new Map<string, number>();
  /** The `time` of the first event seen per instance (when AWS emitted it). */
  readonly firstEventAtMs = new Map<string, number>();

  private constructor(
    readonly cloud: LocalCloud,
    private readonly options: LifecycleCloudOptions,
  ) {
    const { queue, dlq } = cloud.createQueueWithDlq('vpc-lease-lifecycle', {
      maxReceiveCount: options.maxReceiveCount ?? 10,
      // Simulated seconds: the cloud runs scaled but the handler's EC2 and DynamoDB calls take real time, so
      // the timeout must cover an invocation at the scaled pace (AWS advises 6× the function timeout).
      visibilityTimeoutS: options.visibilityTimeoutS ?? 900,
    });
    this.queue = queue;
    this.dlq = dlq;
    cloud.putRule(
      'vpc-lease-lifecycle-hooks',
      { source: ['aws.autoscaling'], 'detail-type': [LAUNCH_DETAIL_TYPE, TERMINATE_DETAIL_TYPE] },
      [queue],
    );
    cloud.putRule(
      'vpc-lease-terminated',
      { source: ['aws.ec2'], 'detail-type': [STATE_CHANGE_DETAIL_TYPE], detail: { state: ['terminated'] } },
      [queue],
    );
    if (options.hookless) cloud.putRule('vpc-lease-launch-states', HOOKLESS_LAUNCH_PATTERN, [queue]);
    Object.assign(process.env, cloud.env);
    const fromEnv = lifecycleDepsFromEnv({
      ...process.env,
      ...controlPlaneConfigToEnv({
        tableName: TABLE,
        clusterName: 'local',
        logLevel: (process.env['VPC_LEASE_TEST_LOG'] ?? 'error') as ControlPlaneConfig['logLevel'],
        ...(typeof options.config === 'function' ? options.config(cloud) : options.config),
      }),
      VPC_LEASE_QUEUE_URL: queue.url(),
      ...localBudgetEnv(options.timeScale ?? DEFAULT_TIME_SCALE, process.env['VPC_LEASE_EC2_BUDGET'] !== 'off'),
    });
    this.deps =
      options.ec2MaxAttempts === undefined
        ? fromEnv
        : {
            ...fromEnv,
            ec2: new SdkEc2({
              ...(fromEnv.metrics ? { metrics: fromEnv.metrics } : {}),
              clientConfig: { maxAttempts: options.ec2MaxAttempts },
            }),
          };
    const plain = createLifecycleBatchHandler(this.deps);
    const handler = async (event: SQSEvent) => {
      for (const r of event.Records) {
        const id = eventInstanceId(r.body);
        this.deliveries.set(id, (this.deliveries.get(id) ?? 0) + 1);
        this.messageDeliveries.set(r.messageId, (this.messageDeliveries.get(r.messageId) ?? 0) + 1);
        if (!this.firstEventAtMs.has(id)) this.firstEventAtMs.set(id, Date.parse(JSON.parse(r.body).time));
      }
      if (!options.crashFor) return plain(event);
      return processSqsBatch(event, async (record) => {
        const id = eventInstanceId(record.body);
        const first = this.deliveries.get(id) === 1;
        const sw = new CrashSwitch(first ? options.crashFor?.(id) : undefined);
        const deps: LifecycleDeps = {
          ...this.deps,
          ec2: crashable(this.deps.ec2, sw, true, 'ec2'),
          store: crashable(this.deps.store, sw, false, 'store'),
          autoScaling: crashable(this.deps.autoScaling, sw, false, 'autoScaling'),
          requeue: crashable(this.deps.requeue, sw, false, 'requeue'),
        };
        try {
          await createLifecycleRecordHandler(deps)(record.body);
        } finally {
          if (sw.crashed) this.crashes += 1;
        }
      });
    };
    this.mapping = cloud.createEventSourceMapping(queue, handler, {
      batchSize: options.batchSize ?? 10,
      maximumConcurrency: 5,
      reportBatchItemFailures: true,
      // Scaled like everything else, so generous: a timed-out batch fails as a whole and comes back.
      functionTimeoutS: 150,
    });
  }

  static async start(options: LifecycleCloudOptions = {}): Promise<LifecycleCloud> {
    const cloud = await startLocalCloud({
      timeScale: options.timeScale ?? DEFAULT_TIME_SCALE,
      leaseTable: TABLE,
      seedNetwork: true,
      ...(options.ec2 ? { ec2: options.ec2 } : {}),
      ...(options.sqs ? { sqs: options.sqs } : {}),
    });
    return new LifecycleCloud(cloud, options);
  }

  // Scaled, the hook timeout passes in real milliseconds while the handler's calls take real time: the
  // default leaves the hooks room, and tests of the timeout itself pass their own.
  private get hookTimeoutS(): number {
    return this.options.hookTimeoutS ?? 7200;
  }

  get subnetIds(): readonly string[] {
    return this.cloud.network?.subnetIds ?? [];
  }

  /** An Auto Scaling group with a launch and a terminate hook (ABANDON by default, as the construct sets). */
  createGroup(name: string, instanceType: string, desiredCapacity: number, subnetId = this.subnetIds[0]!): void {
    this.cloud.autoScaling.simulator.createGroup({
      name,
      minSize: 0,
      maxSize: 50,
      desiredCapacity,
      instanceTypes: [instanceType],
      subnetIds: [subnetId],
      hooks: [
        {
          name: 'vpc-lease-launch',
          transition: LAUNCHING,
          heartbeatTimeoutS: this.hookTimeoutS,
          defaultResult: 'ABANDON',
        },
        {
          name: 'vpc-lease-terminate',
          transition: TERMINATING,
          heartbeatTimeoutS: this.hookTimeoutS,
          defaultResult: 'CONTINUE',
        },
      ],
    });
  }

  /** Instances of a group with their Auto Scaling lifecycle state. */
  groupInstances(name: string): { instanceId: string; lifecycleState: string }[] {
    const group = this.cloud.autoScaling.simulator.getGroup(name);
    return [...(group?.instances.values() ?? [])].map((i) => ({
      instanceId: i.instanceId,
      lifecycleState: i.lifecycleState,
    }));
  }

  arnOf(instanceId: string): string {
    return `arn:aws:ec2:${this.cloud.region}:${this.cloud.accountId}:instance/${instanceId}`;
  }

  async check(): Promise<InvariantReport> {
    return checkInvariants(this.deps.ec2, this.deps.store, {
      clusterName: this.deps.config.clusterName,
      minLeases: this.deps.config.minLeases,
      nowMs: Date.now(),
      maxUnattachedAgeMs: 0,
      maxProvisioningMs: 60_000,
    });
  }

  async close(): Promise<void> {
    await this.cloud.close();
    for (const key of Object.keys(process.env)) if (!(key in this.savedEnv)) delete process.env[key];
    Object.assign(process.env, this.savedEnv);
  }
}

/** Polls until `check` holds (real time; the cloud runs scaled). */
export async function eventually<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
