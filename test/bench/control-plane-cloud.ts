import type { SQSEvent } from 'aws-lambda';
import { lifecycleDepsFromEnv } from '../../lambdas/instance-lifecycle/deps.js';
import { LAUNCHING, TERMINATING } from '../../local-cloud/autoscaling/simulator.js';
import { type LocalCloud, type LocalCloudOptions, startLocalCloud } from '../../local-cloud/cloud.js';
import type { EventSourceMapping } from '../../local-cloud/sqs/event-source-mapping.js';
import type { Queue } from '../../local-cloud/sqs/queue.js';
import type { AutoScalingPort, LifecycleActionRef, LifecycleResult } from '../../shared/autoscaling/port.js';
import { type ControlPlaneConfig, controlPlaneConfigToEnv } from '../../shared/config/control-plane.js';
import type { Ec2Buckets } from '../../shared/ec2/account-buckets.js';
import { EC2_BUCKETS_ENV, localBudgetEnv } from '../../shared/ec2/budget-env.js';
import { checkInvariants, type InvariantReport } from '../../shared/invariants/checker.js';
import { createLifecycleBatchHandler } from '../../shared/lifecycle/batch-handler.js';
import type { LifecycleDeps } from '../../shared/lifecycle/deps.js';
import { LAUNCH_DETAIL_TYPE, STATE_CHANGE_DETAIL_TYPE, TERMINATE_DETAIL_TYPE } from '../../shared/lifecycle/events.js';
import { createLogger } from '../../shared/log.js';
import { type DynaliteProcess, startDynaliteProcess } from './dynalite-process.js';
import { type RequestCounter, startRequestCounter } from './request-counter.js';

export const TABLE = 'vpc-lease';
/** Records per lifecycle invocation, as the construct's SQS event source takes them (infra/construct/allocator.ts). */
export const LIFECYCLE_BATCH_SIZE = 10;
export const CLUSTER = 'bench';

export interface ControlPlaneCloudOptions {
  readonly timeScale: number;
  readonly seed?: number;
  readonly ec2?: LocalCloudOptions['ec2'];
  readonly sqs?: LocalCloudOptions['sqs'];
  readonly config?: Partial<ControlPlaneConfig>;
  /** The event source mapping's MaximumConcurrency (the construct's default is 5). */
  readonly maxConcurrency?: number;
  /** Simulated seconds (the construct's default heartbeatTimeoutS is 300). */
  readonly hookTimeoutS?: number;
  /** Wraps the deps of each invocation (chaos: crashes, faults); gets the record's instance and delivery count. */
  readonly wrapDeps?: (deps: LifecycleDeps, instanceId: string, delivery: number) => LifecycleDeps;
  /** Simulated seconds an invocation may run (the construct's 40 s by default). */
  readonly functionTimeoutS?: number;
  /** Random source for the DynamoDB fault proxy (chaos). */
  readonly random?: () => number;
  /** Large launches: the /20s the local cloud seeds hold ~220 nodes each at 18 addresses. */
  readonly bigSubnets?: boolean;
  /** The account's shared EC2 rate budget in front of EC2 (default on, as deployed). */
  readonly ec2Budget?: boolean;
  /** Real ms a record may sleep for budget tokens (the batch handler's budgetWaitMs; default budgetWaitMsAt). */
  readonly budgetWaitMs?: number;
  /** The account's raised EC2 buckets: the simulator enforces them and the budget is told them. */
  readonly ec2Buckets?: Ec2Buckets;
  /**
   * The Lambdas' DynamoDB requests go to dynalite through the counting proxy only, not also through the IAM
   * endpoint (default false). For runs without node traffic: the endpoint passes control-plane keys through
   * unevaluated, so it only adds an HTTP hop (CPU on the one core everything shares) that AWS does not have.
   */
  readonly dynamoWithoutIam?: boolean;
  /** With `dynamoWithoutIam`: the Lambdas' DynamoDB is dynalite in a child process, on the other core. */
  readonly dynaliteProcess?: boolean;
}

/** The batch handler's own bound on a record's sleep for budget tokens: an AWS duration, like the budget's refill. */
const BUDGET_WAIT_AWS_MS = 4_000;
/** The least a record may wait on a faster clock: a grant costs store round trips, which take real time at any scale. */
export const BUDGET_WAIT_MIN_MS = 500;

/** Real ms for the batch handler's 4 AWS s at `timeScale`: stretched on a slower clock, floored on a faster one. */
export function budgetWaitMsAt(timeScale: number): number {
  return Math.max(BUDGET_WAIT_MIN_MS, Math.round(BUDGET_WAIT_AWS_MS * timeScale));
}

/** How each lifecycle action ended, from the Auto Scaling side. */
export interface ActionOutcome {
  readonly instanceId: string;
  readonly result: LifecycleResult | 'TIMEOUT';
  readonly atMs: number;
  /** Real ms from the hook's start (Pending:Wait, when its event is emitted) to this completion. */
  readonly heldMs?: number;
}

/**
 * The deployed control plane on the local cloud, instrumented for figures: Auto Scaling hooks and EC2 state
 * changes → EventBridge → SQS (+DLQ) → event source mapping → the lifecycle Lambda's handler, whose SDK
 * clients find EC2, Auto Scaling and SQS through AWS_ENDPOINT_URL_* and DynamoDB through a counting proxy.
 * Records: concurrent invocations, handler time (for GB-seconds), each CompleteLifecycleAction with its time,
 * hook timeouts (logged by the simulator), and every DynamoDB request with the capacity it consumed.
 */
export class ControlPlaneCloud {
  private readonly savedEnv = { ...process.env };
  readonly deps: LifecycleDeps;
  readonly queue: Queue;
  readonly dlq: Queue;
  readonly mapping: EventSourceMapping;
  readonly handlerMs: number[] = [];
  readonly deliveries = new Map<string, number>();
  /** The deps of every Lambda container started so far (`deps` is the first). */
  readonly containers: LifecycleDeps[] = [];
  inFlight = 0;
  maxInFlight = 0;
  subnetIds: string[] = [];

  private constructor(
    readonly cloud: LocalCloud,
    readonly dynamo: RequestCounter,
    /** Shared with the simulator's log sink, which adds the timeouts. */
    readonly outcomes: ActionOutcome[],
    private readonly options: ControlPlaneCloudOptions,
    private readonly dynaliteProcess?: DynaliteProcess,
  ) {
    const { queue, dlq } = cloud.createQueueWithDlq('vpc-lease-lifecycle', {
      maxReceiveCount: 10,
      visibilityTimeoutS: 240, // the construct: six times the 40 s function timeout
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
    Object.assign(process.env, cloud.env, { AWS_ENDPOINT_URL_DYNAMODB: dynamo.endpoint });
    // One deps per Lambda container, as each container builds its own from the environment: its own SDK
    // clients, mutation cap and budget queue; the budget's buckets are shared through the table.
    const containerDeps = (): LifecycleDeps => {
      const base = lifecycleDepsFromEnv({
        ...process.env,
        ...controlPlaneConfigToEnv({ tableName: TABLE, clusterName: CLUSTER, logLevel: 'error', ...options.config }),
        VPC_LEASE_QUEUE_URL: queue.url(),
        ...localBudgetEnv(options.timeScale, options.ec2Budget ?? true),
        ...(options.ec2Buckets ? { [EC2_BUCKETS_ENV]: JSON.stringify(options.ec2Buckets) } : {}),
      });
      return { ...base, autoScaling: this.recordingAutoScaling(base.autoScaling) };
    };
    this.deps = containerDeps();
    this.containers.push(this.deps);
    // Every handler, the wrapped ones (chaos) too.
    const batchOptions = { budgetWaitMs: options.budgetWaitMs ?? budgetWaitMsAt(options.timeScale) };
    const idle = [createLifecycleBatchHandler(this.deps, batchOptions)];
    const handler = async (event: SQSEvent) => {
      this.inFlight += 1;
      this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
      const start = performance.now();
      // A warm container if one is idle, else a new one (Lambda scales out up to MaximumConcurrency).
      let plain = idle.pop();
      if (!plain) {
        const deps = containerDeps();
        this.containers.push(deps);
        plain = createLifecycleBatchHandler(deps, batchOptions);
      }
      try {
        if (!options.wrapDeps) return await plain(event);
        // One record per invocation of the wrapped handler, so each gets its own faults.
        const failures: { itemIdentifier: string }[] = [];
        for (const record of event.Records) {
          const id = instanceIdOf(record.body);
          const delivery = (this.deliveries.get(id) ?? 0) + 1;
          this.deliveries.set(id, delivery);
          const one = createLifecycleBatchHandler(options.wrapDeps(this.deps, id, delivery), batchOptions);
          const out = await one({ Records: [record] });
          failures.push(...out.batchItemFailures);
        }
        return { batchItemFailures: failures };
      } finally {
        idle.push(plain);
        this.handlerMs.push(performance.now() - start);
        this.inFlight -= 1;
      }
    };
    this.mapping = cloud.createEventSourceMapping(queue, handler, {
      batchSize: LIFECYCLE_BATCH_SIZE,
      maximumConcurrency: options.maxConcurrency ?? 20,
      reportBatchItemFailures: true,
      functionTimeoutS: options.functionTimeoutS ?? 40,
      // Chaos runs a 900 s function timeout against the 240 s visibility timeout: CPU work is not scaled.
      holdWhileRunning: true,
    });
  }

  static async start(options: ControlPlaneCloudOptions): Promise<ControlPlaneCloud> {
    const outcomes: ActionOutcome[] = [];
    const log = createLogger({
      level: 'info',
      sink: (line) => {
        // The Auto Scaling simulator's own word that a hook ran out of time (invariant 4's failure).
        if (!line.includes('lifecycle action timed out')) return;
        const fields = JSON.parse(line) as { instanceId?: string };
        outcomes.push({ instanceId: fields.instanceId ?? '', result: 'TIMEOUT', atMs: Date.now() });
      },
    });
    const cloud = await startLocalCloud({
      timeScale: options.timeScale,
      seed: options.seed ?? 1,
      leaseTable: TABLE,
      seedNetwork: true,
      log,
      ...(options.ec2 ? { ec2: options.ec2 } : {}),
      ...(options.sqs ? { sqs: options.sqs } : {}),
    });
    let dynamo: RequestCounter | undefined;
    let own: DynaliteProcess | undefined;
    try {
      if (options.dynamoWithoutIam && options.dynaliteProcess) own = await startDynaliteProcess(TABLE, cloud.region);
      const upstream =
        own?.endpoint ?? (options.dynamoWithoutIam ? cloud.endpoints.dynamodbDirect : cloud.endpoints.dynamodb);
      dynamo = await startRequestCounter(upstream, {
        capacity: true,
        ...(options.random ? { random: options.random } : {}),
      });
      for (const [key, spec] of Object.entries(options.ec2Buckets ?? {})) cloud.ec2.admin.setBucket(key, spec);
      const c = new ControlPlaneCloud(cloud, dynamo, outcomes, options, own);
      c.subnetIds = [...(cloud.network?.subnetIds ?? [])];
      if (options.bigSubnets) {
        // 10.0.64.0/18 and 10.0.128.0/18 (16 k addresses each) beside the seeded /20s, one per zone.
        const vpcId = cloud.network!.vpcId;
        c.subnetIds = [
          cloud.ec2.admin.seedSubnet(vpcId, '10.0.64.0/18', `${cloud.region}a`).subnetId,
          cloud.ec2.admin.seedSubnet(vpcId, '10.0.128.0/18', `${cloud.region}b`).subnetId,
          cloud.ec2.admin.seedSubnet(vpcId, '10.0.192.0/18', `${cloud.region}c`).subnetId,
        ];
      }
      return c;
    } catch (err) {
      await dynamo?.close();
      await own?.close();
      await cloud.close();
      throw err;
    }
  }

  private recordingAutoScaling(inner: AutoScalingPort): AutoScalingPort {
    return {
      completeLifecycleAction: async (ref: LifecycleActionRef, result: LifecycleResult) => {
        // Read before completing: the simulator forgets an action once it has its result.
        const startedMs = this.cloud.autoScaling.simulator
          .getGroup(ref.autoScalingGroupName)
          ?.instances.get(ref.instanceId)
          ?.actions.get(ref.hookName)?.startedMs;
        const outcome = await inner.completeLifecycleAction(ref, result);
        const atMs = Date.now();
        if (outcome === 'done' && ref.hookName === 'vpc-lease-launch')
          this.outcomes.push({
            instanceId: ref.instanceId,
            result,
            atMs,
            ...(startedMs !== undefined ? { heldMs: atMs - startedMs } : {}),
          });
        return outcome;
      },
      recordLifecycleActionHeartbeat: (ref) => inner.recordLifecycleActionHeartbeat(ref),
    };
  }

  /**
   * A group with the construct's hooks: launch (ABANDON by default) and terminate (CONTINUE); with
   * `launchTemplateName`, it launches from that EC2 launch template (its NetworkInterfaces come along).
   */
  createGroup(
    name: string,
    instanceType: string,
    desiredCapacity: number,
    subnetIds = this.subnetIds,
    launchTemplateName?: string,
  ): void {
    const heartbeatTimeoutS = this.options.hookTimeoutS ?? 300;
    this.cloud.autoScaling.simulator.createGroup({
      name,
      ...(launchTemplateName ? { launchTemplate: { LaunchTemplateName: launchTemplateName } } : {}),
      minSize: 0,
      maxSize: Math.max(desiredCapacity, 1) * 2,
      desiredCapacity,
      instanceTypes: [instanceType],
      subnetIds,
      hooks: [
        { name: 'vpc-lease-launch', transition: LAUNCHING, heartbeatTimeoutS, defaultResult: 'ABANDON' },
        { name: 'vpc-lease-terminate', transition: TERMINATING, heartbeatTimeoutS, defaultResult: 'CONTINUE' },
      ],
    });
  }

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

  async check(maxProvisioningMs = 60_000): Promise<InvariantReport> {
    return checkInvariants(this.deps.ec2, this.deps.store, {
      clusterName: CLUSTER,
      minLeases: this.deps.config.minLeases,
      nowMs: Date.now(),
      maxUnattachedAgeMs: 0,
      maxProvisioningMs,
    });
  }

  async close(): Promise<void> {
    await this.cloud.close();
    await this.dynamo.close();
    await this.dynaliteProcess?.close();
    for (const key of Object.keys(process.env)) if (!(key in this.savedEnv)) delete process.env[key];
    Object.assign(process.env, this.savedEnv);
  }
}

export function instanceIdOf(body: string): string {
  try {
    const e = JSON.parse(body) as { detail?: { EC2InstanceId?: string; 'instance-id'?: string } };
    return e.detail?.EC2InstanceId ?? e.detail?.['instance-id'] ?? '';
  } catch {
    return '';
  }
}

/** Polls until `check` holds or `timeoutMs` passes (then returns undefined: the caller reports what is missing). */
export async function waitFor<T>(
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs: number,
): Promise<T | undefined> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) return undefined;
    await new Promise((r) => setTimeout(r, 25));
  }
}
