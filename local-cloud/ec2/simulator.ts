import { type BucketSpec, loadInstanceTypes, loadThrottling, type ThrottlingTable } from '../../shared/data/catalog.js';
import type { InstanceLimits } from '../../shared/domain/limits.js';
import { errorMessage } from '../../shared/errors.js';
import { sleepMs } from '../../shared/sleep.js';
import type {
  Ec2SimulatorApi,
  InstanceStateChange,
  LaunchRequest,
  SimInstance,
  SimInterface,
  SimLaunchTemplate,
} from '../ports.js';
import { type ActionContext, HANDLERS } from './actions.js';
import { decodeRequest, encodeError, encodeResponse } from './codec.js';
import { Ec2ApiError } from './errors.js';
import { FaultInjector, type FaultSpec } from './faults.js';
import { ClientTokens } from './idempotency.js';
import { launchInstance, terminateInstance } from './instances.js';
import { LatencyModel } from './latency.js';
import { findLaunchTemplate } from './launch-templates.js';
import type { SubnetRecord, VpcRecord } from './model.js';
import { SeededRandom } from './random.js';
import { TokenBuckets } from './throttle.js';
import { Timeline } from './timeline.js';
import { enisOf } from './views.js';
import { type Ec2Delays, Ec2World } from './world.js';

export interface Ec2SimulatorOptions {
  readonly region?: string;
  readonly accountId?: string;
  /** Seeds ids, MACs, address choice, latency jitter and probabilistic faults. Default 1. */
  readonly seed?: number;
  /** Real ms per AWS ms: 1 is real time, 0.01 is 100× faster, 0 (default) makes every delay immediate. */
  readonly timeScale?: number;
  /** AWS-side durations in AWS ms; see `DEFAULT_DELAYS`. */
  readonly delays?: Partial<Ec2Delays>;
  /** `describe` (default): the eventual-consistency window hides new resources from Describe only; `all`: also from mutating calls. */
  readonly eventualConsistencyScope?: 'describe' | 'all';
  /** Enforce the token buckets (default false; they only bite with timeScale > 0). */
  readonly throttling?: boolean;
  /** Apply the AWS-like latency model (default false). */
  readonly latency?: boolean;
  readonly instanceTypes?: ReadonlyMap<string, InstanceLimits>;
  readonly throttlingTable?: ThrottlingTable;
  /**
   * Real time in ms (default Date.now). Deadlines — eventual-consistency windows, bucket refill — read it;
   * a test that steps it by hand checks them without racing the wall clock. Delays still run on timers.
   */
  readonly clock?: () => number;
}

/**
 * AWS-side durations. Attach/detach: ENI attachments typically reach `attached` within a few seconds of the
 * API call (the VPC CNI waits up to ~10 s for one); instance boot to `running` ~15 s; shutdown ~30 s.
 */
export const DEFAULT_DELAYS: Ec2Delays = {
  attachMs: 3000,
  detachMs: 3000,
  instancePendingMs: 15_000,
  instanceShutdownMs: 30_000,
  eventualConsistencyMs: 0,
};

export interface ActionCounts {
  /** Requests that reached the simulator for this action, throttled ones included. */
  calls: number;
  ok: number;
  /** Errors answered after the token was taken (rule violations, injected faults). */
  errors: number;
  /** Answered RequestLimitExceeded by the token bucket (counted apart from `errors`). */
  throttled: number;
  /** Of `errors`, how many were injected faults. */
  faulted: number;
}

export interface Ec2Snapshot {
  readonly vpcs: { vpcId: string; cidrBlock: string }[];
  readonly subnets: {
    subnetId: string;
    vpcId: string;
    cidrBlock: string;
    availabilityZone: string;
    availableIpAddressCount: number;
  }[];
  readonly instances: { instanceId: string; instanceType: string; state: string; subnetId: string }[];
  readonly networkInterfaces: {
    eniId: string;
    subnetId: string;
    privateIps: string[];
    prefixes: string[];
    ipv6Addresses: string[];
    ipv6Prefixes: string[];
    tags: Record<string, string>;
    attachment: { instanceId: string; deviceIndex: number; status: string; deleteOnTermination: boolean } | undefined;
  }[];
}

export interface QueryResult {
  readonly statusCode: number;
  readonly body: string;
  readonly requestId: string;
}

export interface Ec2Call {
  readonly action: string;
  readonly input: Readonly<Record<string, unknown>>;
  readonly output: unknown;
}

/** The in-process admin interface; `/_admin/*` on the server maps onto the same methods. */
export interface Ec2Admin {
  failNext(spec: FaultSpec): void;
  clearFaults(): void;
  /** Extra real milliseconds on every call of `action` (`*` for all); 0 removes it. */
  addLatency(action: string, extraRealMs: number): void;
  setLatencyModel(enabled: boolean): void;
  setBucket(key: string, spec: BucketSpec): void;
  setThrottling(enabled: boolean): void;
  setTimeScale(timeScale: number): void;
  setDelays(delays: Partial<Ec2Delays>): void;
  setEventualConsistencyScope(scope: 'describe' | 'all'): void;
  pauseAttachments(): void;
  resumeAttachments(): void;
  counts(): Record<string, ActionCounts>;
  resetCounts(): void;
  /** A VPC with an Amazon-provided IPv6 /56 (so the local world can run every `ipFamily`). */
  seedVpc(cidrBlock: string): VpcRecord;
  /** A subnet with the VPC's next free /64 beside its IPv4 block. */
  seedSubnet(vpcId: string, cidrBlock: string, availabilityZone?: string): SubnetRecord;
  snapshot(): Ec2Snapshot;
}

export class Ec2Simulator implements Ec2SimulatorApi, Ec2Admin {
  readonly region: string;
  readonly accountId: string;
  readonly world: Ec2World;
  readonly timeline: Timeline;
  private readonly buckets: TokenBuckets;
  private readonly latencyModel: LatencyModel;
  private readonly faults: FaultInjector;
  private readonly tokens = new ClientTokens();
  private readonly callCounts = new Map<string, ActionCounts>();
  private readonly requestIds: SeededRandom;
  private readonly callListeners = new Set<(call: Ec2Call) => void>();

  constructor(options: Ec2SimulatorOptions = {}) {
    this.region = options.region ?? 'us-east-1';
    this.accountId = options.accountId ?? '123456789012';
    const seed = options.seed ?? 1;
    this.timeline = new Timeline(options.timeScale ?? 0, options.clock);
    // Separate streams so turning latency or faults on does not change the ids a test sees.
    this.world = new Ec2World({
      region: this.region,
      accountId: this.accountId,
      random: new SeededRandom(seed),
      timeline: this.timeline,
      instanceTypes: options.instanceTypes ?? loadInstanceTypes(),
      delays: { ...DEFAULT_DELAYS, ...options.delays },
      consistencyScope: options.eventualConsistencyScope ?? 'describe',
    });
    this.latencyModel = new LatencyModel(new SeededRandom(seed ^ 0x5bd1e995), options.latency ?? false);
    this.faults = new FaultInjector(new SeededRandom(seed ^ 0x27d4eb2f));
    this.requestIds = new SeededRandom(seed ^ 0x165667b1);
    this.buckets = new TokenBuckets(
      options.throttlingTable ?? loadThrottling(),
      this.timeline,
      options.throttling ?? false,
    );
  }

  /** Every call that took effect, with its decoded input and output (e.g. to prove whose ENIs a caller touched). */
  onCall(listener: (call: Ec2Call) => void): () => void {
    this.callListeners.add(listener);
    return () => this.callListeners.delete(listener);
  }

  /** One EC2 Query request, start to finish: count, throttle, faults, latency, rules, XML. */
  async handleQuery(params: URLSearchParams): Promise<QueryResult> {
    const requestId = this.requestId();
    const action = params.get('Action') ?? '';
    const counts = this.countsFor(action || '(none)');
    counts.calls += 1;
    let throttled = false;
    try {
      if (!action) throw new Ec2ApiError('MissingAction', 'The request must contain the parameter Action');
      const handler = HANDLERS[action];
      if (!handler) throw new Ec2ApiError('InvalidAction', `The action ${action} is not valid for this web service.`);
      const input = decodeRequest(action, params);
      try {
        this.buckets.take(this.buckets.keyFor(action, input));
      } catch (err) {
        counts.throttled += 1;
        throttled = true;
        throw err;
      }
      const before = this.faults.draw(action, 'before');
      if (before) {
        counts.faulted += 1;
        throw before;
      }
      await this.delay(action);
      if (input['DryRun'] === true) {
        throw new Ec2ApiError('DryRunOperation', 'Request would have succeeded, but DryRun flag is set.');
      }
      const ctx: ActionContext = { world: this.world, tokens: this.tokens };
      const output = handler(ctx, input);
      const after = this.faults.draw(action, 'after');
      if (after) {
        counts.faulted += 1;
        throw after;
      }
      counts.ok += 1;
      for (const listener of this.callListeners) listener({ action, input, output });
      return { statusCode: 200, body: encodeResponse(action, output, requestId), requestId };
    } catch (err) {
      if (!(err instanceof Ec2ApiError)) {
        counts.errors += 1;
        // A simulator bug, not a modelled fault: say what broke (the SDK will retry a 500, so also log it).
        process.stderr.write(`ec2 simulator: ${action} failed: ${errorMessage(err)}\n`);
        return {
          statusCode: 500,
          body: encodeError('InternalError', `An internal error has occurred: ${errorMessage(err)}`, requestId),
          requestId,
        };
      }
      if (!throttled) counts.errors += 1;
      return { statusCode: err.statusCode, body: encodeError(err.code, err.message, requestId), requestId };
    }
  }

  private async delay(action: string): Promise<void> {
    const simMs = this.latencyModel.simMs(action);
    const extraMs = this.latencyModel.extraMs(action);
    const totalMs = this.timeline.realMs(simMs) + extraMs;
    if (totalMs > 0) await sleepMs(totalMs);
  }

  private requestId(): string {
    const h = this.requestIds.hex(32);
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20)}`;
  }

  private countsFor(action: string): ActionCounts {
    let counts = this.callCounts.get(action);
    if (!counts) {
      counts = { calls: 0, ok: 0, errors: 0, throttled: 0, faulted: 0 };
      this.callCounts.set(action, counts);
    }
    return counts;
  }

  // Ec2SimulatorApi — the view the Auto Scaling simulator and IMDS share with the Query API.

  launchInstance(request: LaunchRequest): SimInstance {
    return this.simInstance(launchInstance(this.world, request).instanceId) as SimInstance;
  }

  terminateInstance(instanceId: string): void {
    terminateInstance(this.world, instanceId);
  }

  getInstance(instanceId: string): SimInstance | undefined {
    return this.simInstance(instanceId);
  }

  instanceInterfaces(instanceId: string): SimInterface[] {
    return enisOf(this.world, instanceId).map((eni) => {
      const subnet = this.world.subnet(eni.subnetId);
      const attachment = eni.attachment;
      if (!attachment) throw new Error(`unreachable: ${eni.eniId} listed without attachment`);
      return {
        eniId: eni.eniId,
        deviceIndex: attachment.deviceIndex,
        networkCardIndex: attachment.networkCardIndex,
        mac: eni.mac,
        subnetId: eni.subnetId,
        subnetCidr: subnet.cidrBlock,
        vpcId: eni.vpcId,
        vpcCidrs: [this.world.vpc(eni.vpcId).cidrBlock],
        privateIpAddresses: [...eni.privateIps],
        ipv4Prefixes: [...eni.prefixes],
        attachmentState: attachment.status,
        deleteOnTermination: attachment.deleteOnTermination,
      };
    });
  }

  onInstanceStateChange(listener: (change: InstanceStateChange) => void): () => void {
    return this.world.onInstanceStateChange(listener);
  }

  launchTemplate(spec: { readonly id?: string; readonly name?: string }): SimLaunchTemplate | undefined {
    return findLaunchTemplate(this.world, spec);
  }

  private simInstance(instanceId: string): SimInstance | undefined {
    const i = this.world.instances.get(instanceId);
    if (!i) return undefined;
    return {
      instanceId: i.instanceId,
      instanceType: i.instanceType,
      state: i.state,
      availabilityZone: i.availabilityZone,
      region: this.region,
      accountId: this.accountId,
      vpcId: i.vpcId,
      subnetId: i.subnetId,
      imageId: i.imageId,
      privateIpAddress: i.privateIp,
      launchTimeMs: i.launchTimeMs,
      tags: Object.fromEntries(i.tags),
      ...(i.publicIp ? { publicIpAddress: i.publicIp } : {}),
    };
  }

  // Ec2Admin

  failNext(spec: FaultSpec): void {
    this.faults.add(spec);
  }
  clearFaults(): void {
    this.faults.clear();
  }
  addLatency(action: string, extraRealMs: number): void {
    this.latencyModel.setExtra(action, extraRealMs);
  }
  setLatencyModel(enabled: boolean): void {
    this.latencyModel.modelEnabled = enabled;
  }
  setBucket(key: string, spec: BucketSpec): void {
    this.buckets.setBucket(key, spec);
  }
  setThrottling(enabled: boolean): void {
    this.buckets.enabled = enabled;
  }
  setTimeScale(timeScale: number): void {
    if (!(timeScale >= 0)) throw new RangeError(`timeScale must be >= 0, got ${timeScale}`);
    this.timeline.timeScale = timeScale;
  }
  setDelays(delays: Partial<Ec2Delays>): void {
    this.world.config.delays = { ...this.world.config.delays, ...delays };
  }
  setEventualConsistencyScope(scope: 'describe' | 'all'): void {
    this.world.config.consistencyScope = scope;
  }
  pauseAttachments(): void {
    this.world.pauseAttachments();
  }
  resumeAttachments(): void {
    this.world.resumeAttachments();
  }
  counts(): Record<string, ActionCounts> {
    return Object.fromEntries([...this.callCounts].map(([k, v]) => [k, { ...v }]));
  }
  resetCounts(): void {
    this.callCounts.clear();
  }
  seedVpc(cidrBlock: string): VpcRecord {
    return this.world.createVpc(cidrBlock, true);
  }
  seedSubnet(vpcId: string, cidrBlock: string, availabilityZone?: string): SubnetRecord {
    const ipv6 = this.world.nextIpv6SubnetBlock(vpcId);
    return this.world.createSubnet(vpcId, cidrBlock, availabilityZone, ipv6);
  }
  /** A plain summary of everything the simulator holds, for operators of `npm start` and for debugging. */
  snapshot(): Ec2Snapshot {
    const w = this.world;
    return {
      vpcs: [...w.vpcs.values()].map((v) => ({ vpcId: v.vpcId, cidrBlock: v.cidrBlock })),
      subnets: [...w.subnets.values()].map((s) => ({
        subnetId: s.subnetId,
        vpcId: s.vpcId,
        cidrBlock: s.cidrBlock,
        availabilityZone: s.availabilityZone,
        availableIpAddressCount: s.pool.available(),
      })),
      instances: [...w.instances.values()].map((i) => ({
        instanceId: i.instanceId,
        instanceType: i.instanceType,
        state: i.state,
        subnetId: i.subnetId,
      })),
      networkInterfaces: [...w.enis.values()].map((e) => ({
        eniId: e.eniId,
        subnetId: e.subnetId,
        privateIps: [...e.privateIps],
        prefixes: [...e.prefixes],
        ipv6Addresses: [...e.ipv6Addresses],
        ipv6Prefixes: [...e.ipv6Prefixes],
        tags: Object.fromEntries(e.tags),
        attachment: e.attachment
          ? {
              instanceId: e.attachment.instanceId,
              deviceIndex: e.attachment.deviceIndex,
              status: e.attachment.status,
              deleteOnTermination: e.attachment.deleteOnTermination,
            }
          : undefined,
      })),
    };
  }

  /** Tokens left in a bucket (an action name or the DescribeNetworkInterfaces key). */
  bucketTokens(key: string): number {
    return this.buckets.tokens(key);
  }

  close(): void {
    this.timeline.close();
  }
}
