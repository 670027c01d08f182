import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { type Ec2SimulatorOptions, type Ec2SimulatorServer, startEc2Simulator } from '../../local-cloud/ec2/index.js';
import { ManualClock } from '../../shared/clock.js';
import { type ControlPlaneConfig, parseControlPlaneConfig } from '../../shared/config/control-plane.js';
import { instanceArn } from '../../shared/domain/arn.js';
import type { EniRecord, NodeRecord } from '../../shared/domain/node.js';
import type { DynamoApi } from '../../shared/dynamo/api.js';
import { SdkDynamoApi } from '../../shared/dynamo/sdk-client.js';
import { SdkEc2 } from '../../shared/ec2/sdk-ec2.js';
import { eniClientToken, podEniTags } from '../../shared/ec2/tags.js';
import { checkInvariants, formatViolations } from '../../shared/invariants/checker.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import { ensureTable } from '../../shared/lease-store/ensure-table.js';
import type { LeaseStore } from '../../shared/lease-store/port.js';
import { expectedLeases } from '../../shared/lifecycle/pod-eni.js';
import { createLogger, type Logger } from '../../shared/log.js';
import { Metrics } from '../../shared/metrics.js';
import { maxPodsFor } from '../../shared/planner/max-pods.js';
import type { PoolDeps } from '../../shared/pool/deps.js';
import { type DynaliteHandle, startDynalite } from '../support/dynalite.js';

export const REGION = 'us-east-1';
export const ACCOUNT = '123456789012';

/**
 * The real parts of a pool or reconcile test: the EC2 simulator behind the real SDK client (through the
 * lifecycle's adapter), dynalite behind the real DynamoDB client and lease store, a manual clock for lease
 * times, and captured log lines.
 */
export interface PoolEnv {
  readonly sim: Ec2SimulatorServer;
  readonly dynalite: DynaliteHandle;
  readonly ec2: SdkEc2;
  readonly store: LeaseStore;
  /** The store's DynamoDB API and table (for the reconciler's partition scan). */
  readonly api: DynamoApi;
  readonly tableName: string;
  readonly clock: ManualClock;
  readonly logger: Logger;
  readonly logs: string[];
  readonly metrics: Metrics;
  readonly vpcId: string;
  readonly subnetId: string;
  config: ControlPlaneConfig;
  deps(overrides?: Partial<PoolDeps>): PoolDeps;
  close(): Promise<void>;
}

export interface PoolEnvOptions {
  readonly sim?: Ec2SimulatorOptions;
  readonly config?: Partial<Record<keyof ControlPlaneConfig, unknown>>;
  /** SDK attempts per call (1 = no retries; the lifecycle's default is 5). */
  readonly maxAttempts?: number;
  readonly subnetCidr?: string;
}

let tables = 0;

export async function startPoolEnv(options: PoolEnvOptions = {}): Promise<PoolEnv> {
  const sim = await startEc2Simulator(options.sim ?? {});
  const dynalite = await startDynalite();
  const credentials = { accessKeyId: 'AKIDLOCAL', secretAccessKey: 'local-secret' };
  const dynamo = new DynamoDBClient({ endpoint: dynalite.endpoint, region: REGION, credentials });
  tables += 1;
  const tableName = `pool-${process.pid}-${tables}`;
  await ensureTable(dynamo, tableName, { pollMs: 10 });
  const logs: string[] = [];
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  const logger = createLogger({ level: 'debug', sink: (line) => logs.push(line), nowMs: () => clock.nowMs() });
  const metrics = new Metrics(logger, 'test', () => clock.nowMs());
  const ec2 = new SdkEc2({
    metrics,
    clientConfig: {
      endpoint: sim.endpoint,
      region: REGION,
      credentials,
      maxAttempts: options.maxAttempts ?? 2,
      retryMode: 'standard',
    },
  });
  const api = new SdkDynamoApi(dynamo);
  const store = new DynamoLeaseStore({ api, tableName });
  const vpc = sim.admin.seedVpc('10.0.0.0/16');
  const subnet = sim.admin.seedSubnet(vpc.vpcId, options.subnetCidr ?? '10.0.0.0/20', 'us-east-1a');
  const env: PoolEnv = {
    sim,
    dynalite,
    ec2,
    store,
    api,
    tableName,
    clock,
    logger,
    logs,
    metrics,
    vpcId: vpc.vpcId,
    subnetId: subnet.subnetId,
    config: parseControlPlaneConfig({
      clusterName: 'test-cluster',
      tableName,
      minLeases: 4,
      warmLowLeases: 3,
      warmHighLeases: 6,
      maxPods: 110,
      releaseDelayMs: 300_000,
      reuseWaitMs: 30_000,
      eniMinAgeForGcMs: 600_000,
      ...options.config,
    }),
    deps: (overrides = {}) => ({
      ec2,
      store,
      config: env.config,
      clock,
      logger,
      metrics,
      sleep: (ms) => new Promise((resolve) => setTimeout(resolve, Math.min(ms, 5))),
      ...overrides,
    }),
    close: async () => {
      ec2.client.destroy();
      dynamo.destroy();
      await sim.close();
      await dynalite.close();
    },
  };
  return env;
}

export interface ReadyNode {
  readonly instanceId: string;
  readonly instanceArn: string;
  readonly node: NodeRecord;
}

/**
 * A READY node as the lifecycle Lambda leaves it: an instance, pod ENIs created with vpc-lease's tags and
 * ClientToken, attached with DeleteOnTermination, recorded LEASED on the node item, and their FREE leases —
 * built through the same SDK adapter and store, so the pool starts from a state the launch really produces.
 */
export async function readyNode(
  env: PoolEnv,
  options: {
    instanceType?: string;
    enis?: readonly { ipCount?: number; prefixCount?: number }[];
    /** The figure the launch recorded (default: the planner's, under the current configuration). */
    maxPods?: number;
    /** The pod ENIs' subnet (default the env's). */
    subnetId?: string;
    /** The launch's candidate subnets in the AZ, as recorded (default the ENIs' subnet). */
    podSubnetIds?: readonly string[];
  } = {},
): Promise<ReadyNode> {
  const instanceType = options.instanceType ?? 'm5.large';
  const instance = env.sim.api.launchInstance({ instanceType, subnetId: env.subnetId });
  const arn = instanceArn(REGION, ACCOUNT, instance.instanceId, 'aws');
  const nowMs = env.clock.nowMs();
  const limits = await env.ec2.describeInstanceLimits(instanceType);
  const subnetId = options.subnetId ?? env.subnetId;
  const [subnet] = await env.ec2.describeSubnets({ subnetIds: [subnetId] });
  const records: EniRecord[] = [];
  for (const [i, spec] of (options.enis ?? [{ ipCount: 6 }]).entries()) {
    const deviceIndex = i + 1;
    const request = { subnetId, ipCount: spec.ipCount ?? 0, prefixCount: spec.prefixCount ?? 0 };
    const clientToken = eniClientToken(instance.instanceId, deviceIndex, request);
    const eni = await env.ec2.createNetworkInterface({
      ...request,
      securityGroupIds: [],
      tags: podEniTags(env.config.clusterName, instance.instanceId, deviceIndex, nowMs),
      clientToken,
    });
    const attachmentId = await env.ec2.attachNetworkInterface({
      eniId: eni.eniId,
      instanceId: instance.instanceId,
      deviceIndex,
      networkCardIndex: 0,
    });
    await env.ec2.setDeleteOnTermination(eni.eniId, attachmentId, true);
    records.push({
      deviceIndex,
      networkCardIndex: 0,
      subnetId,
      clientToken,
      step: 'LEASED',
      eniId: eni.eniId,
      attachmentId,
      mac: eni.mac,
      subnetCidr: subnet!.cidr,
      addresses: [...eni.secondaryIps],
      prefixes: [...eni.prefixes],
      deleteOnTermination: true,
    });
  }
  await waitAttached(
    env,
    records.map((r) => r.eniId!),
  );
  const node: NodeRecord = {
    instanceArn: arn,
    instanceId: instance.instanceId,
    instanceType,
    availabilityZone: instance.availabilityZone,
    limits,
    podSubnetIds: [...(options.podSubnetIds ?? [subnetId])],
    phase: 'READY',
    enis: records,
    maxPods:
      options.maxPods ??
      maxPodsFor(limits, { prefixDelegation: env.config.prefixDelegation, capPods: env.config.maxPods }),
    createdAtMs: nowMs,
    updatedAtMs: nowMs,
    version: 1,
  };
  if (!(await env.store.createNode(node))) throw new Error('node item exists');
  await env.store.putLeases(expectedLeases(node, env.config.maxPods), nowMs);
  return { instanceId: instance.instanceId, instanceArn: arn, node: (await env.store.getNode(arn))! };
}

export async function waitAttached(env: PoolEnv, eniIds: readonly string[]): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (eniIds.length === 0) return;
    const seen = await env.ec2.describeNetworkInterfaces({ eniIds });
    if (seen.every((e) => e.attachment?.status === 'attached')) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`ENIs ${eniIds.join(', ')} never attached`);
}

/** DESIGN.md invariants 2–6 through the shared checker; returns the violations as text ('' when none). */
export async function invariantViolations(env: PoolEnv, maxUnattachedAgeMs = 0): Promise<string> {
  const report = await checkInvariants(env.ec2, env.store, {
    clusterName: env.config.clusterName,
    minLeases: env.config.minLeases,
    nowMs: env.clock.nowMs(),
    maxUnattachedAgeMs,
    maxProvisioningMs: 3_600_000,
  });
  return formatViolations(report);
}

let pods = 0;

/** A pod's ADD as the CNI does it: one claim for a fresh (containerId, ifName). */
export async function claimOne(env: PoolEnv, arn: string): Promise<{ containerId: string; ip: string }> {
  pods += 1;
  const containerId = `pod-${process.pid}-${pods}`;
  const lease = await env.store.claim(
    arn,
    { containerId, ifName: 'eth0', netns: `/var/run/netns/${containerId}` },
    env.clock.nowMs(),
  );
  return { containerId, ip: lease.ip };
}
