import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { AutoScalingClient } from '@aws-sdk/client-auto-scaling';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { EC2Client } from '@aws-sdk/client-ec2';
import type { ControlPlaneConfig } from '../../shared/config/control-plane.js';
import { SdkDynamoApi } from '../../shared/dynamo/sdk-client.js';
import { EC2_CLIENT_DEFAULTS, SdkEc2 } from '../../shared/ec2/sdk-ec2.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import { clusterTagKey } from '../../shared/lifecycle/hookless.js';
import { DEFAULT_HOST_NETWORK_PODS } from '../../shared/planner/max-pods.js';
import { type LocalCloud, startLocalCloud } from '../cloud.js';
import { buildReport } from './build-report.js';
import { chooseDatapath } from './datapath.js';
import { type Deployment, deployControlPlane } from './deploy.js';
import { HooklessNodes } from './hookless-nodes.js';
import { HostNet } from './host-net.js';
import { checkAll } from './invariants.js';
import type { NodeAgent } from './node-agents.js';
import { NodeGroup, type ScenarioNodes } from './node-group.js';
import type { ScenarioOptions } from './options.js';
import type { PodDriver } from './pods.js';
import type { ScenarioReport } from './report.js';
import { until } from './until.js';
import { Workload } from './workload.js';

export { GROUP_NAME } from './node-group.js';

export const TABLE_NAME = 'vpc-lease';
export const CLUSTER_NAME = 'vpc-lease';
const POD_SUBNET_TAG = { 'vpc-lease/pods': 'true' };
/** The hooks' heartbeat timeout, simulated seconds: scaled, it still leaves the handler's real-time calls room. */
const HOOK_TIMEOUT_S = 900;
/** Cooldown of released addresses in this run (the CNI's and the control plane's), short so churn reuses them. */
const REUSE_WAIT_MS = 2_000;

export interface ScenarioHooks {
  /** One human line of progress (the caller prefixes time and writes it to stderr). */
  readonly progress: (line: string) => void;
}

/** What a finished run leaves for `--keep` and tests: the cloud (still running) and how to reach it. */
export interface ScenarioRun {
  readonly report: ScenarioReport;
  readonly cloud: LocalCloud;
  readonly deployment: Deployment;
  readonly vpcId: string;
  readonly subnetIds: readonly string[];
  /** Each running node's agent (CNI datapath only): `--keep` records their metrics URLs. */
  readonly agents: () => readonly NodeAgent[];
  /**
   * Stops the control plane and the cloud and removes every namespace and link the run made; returns how many
   * it removed. Idempotent.
   */
  close(): Promise<{ links: number; namespaces: number }>;
}

/**
 * The whole system locally: the local cloud (DynamoDB on disk), the control plane deployed as the CDK stack
 * deploys it, an Auto Scaling group with lifecycle hooks scaled out, pods through the real CNI binary (or, with
 * no root, the lease store), pod churn, a node termination, a reconcile, and a report with the invariants.
 * `hostNet.cleanup()` is also what the caller's signal handlers run, so no namespace or link survives Ctrl-C.
 */
export async function runScenario(
  options: ScenarioOptions,
  hooks: ScenarioHooks,
  hostNet: HostNet = new HostNet(),
): Promise<ScenarioRun> {
  const startedMs = Date.now();
  const say = hooks.progress;
  // EC2 and Auto Scaling live in memory, so rows a previous run left on disk would name instances and ENIs
  // that no longer exist: every run starts from an empty table, and its data stays on disk after it.
  rmSync(join(options.localDir, 'dynamodb'), { recursive: true, force: true });
  mkdirSync(options.localDir, { recursive: true });

  const cloud = await startLocalCloud({
    dataDir: options.localDir,
    timeScale: options.timeScale,
    leaseTable: TABLE_NAME,
    seedNetwork: true,
    sqs: { duplicateRate: options.duplicateRate },
    // Only the control plane's key passes IAM unevaluated; any other key not issued by IMDS is refused.
    iam: { controlPlaneKeys: ['local'] },
  });
  let deployment: Deployment | undefined;
  let driver: PodDriver | undefined;
  let closed = false;
  const clients: { destroy(): void }[] = [];
  const close = async (): Promise<{ links: number; namespaces: number }> => {
    if (closed) return { links: 0, namespaces: 0 };
    closed = true;
    const before = hostNet.counts;
    await driver?.close().catch(() => undefined);
    hostNet.cleanup();
    await deployment?.stop();
    for (const c of clients) c.destroy();
    await cloud.close();
    return before;
  };
  try {
    const network = cloud.network!;
    say(
      `local cloud up: EC2 ${cloud.endpoints.ec2}, DynamoDB ${cloud.endpoints.dynamodb} (data in ${options.localDir})`,
    );
    let podSubnetId: string | undefined;
    if (options.podSubnet) {
      const subnet = cloud.ec2.admin.seedSubnet(network.vpcId, options.podSubnet, `${cloud.region}a`);
      for (const [k, v] of Object.entries(POD_SUBNET_TAG)) subnet.tags.set(k, v);
      podSubnetId = subnet.subnetId;
    }
    const config: Partial<ControlPlaneConfig> = {
      clusterName: CLUSTER_NAME,
      tableName: TABLE_NAME,
      prefixDelegation: options.prefixDelegation,
      ipFamily: options.ipFamily,
      ...(podSubnetId ? { podSubnetTags: POD_SUBNET_TAG } : {}),
      // Short waits so churn reuses addresses and the pool releases excess within the run.
      reuseWaitMs: REUSE_WAIT_MS,
      releaseDelayMs: 10_000,
      heartbeatTimeoutS: HOOK_TIMEOUT_S,
      // Unowned ENIs and partitions of vanished instances are collected only once this old: 0 lets the reconcile
      // of a one-minute run act on them.
      eniMinAgeForGcMs: 0,
      logLevel: 'error',
    };
    deployment = deployControlPlane(cloud, {
      config,
      hooklessLaunches: options.hookless,
      // The reconcile is a step of the scenario, so what it reports is its own; its schedule starts with --keep.
      schedules: ['pool-manager'],
      onScheduleError: (fn, err) => say(`scheduled ${fn} invocation failed (next period retries): ${String(err)}`),
    });
    say(
      `control plane deployed: event queue + DLQ, ${options.hookless ? 3 : 2} EventBridge rules, lifecycle handler, pool-manager schedule`,
    );

    const credentials = { accessKeyId: 'local', secretAccessKey: 'local' };
    const asg = new AutoScalingClient({ region: cloud.region, endpoint: cloud.endpoints.autoScaling, credentials });
    const ec2Client = new EC2Client({
      ...EC2_CLIENT_DEFAULTS,
      region: cloud.region,
      endpoint: cloud.endpoints.ec2,
      credentials,
    });
    const ddb = new DynamoDBClient({ region: cloud.region, endpoint: cloud.endpoints.dynamodb, credentials });
    clients.push(asg, ec2Client, ddb);
    const ec2 = new SdkEc2({ client: ec2Client });
    const store = new DynamoLeaseStore({ api: new SdkDynamoApi(ddb), tableName: TABLE_NAME });

    const group: ScenarioNodes = options.hookless
      ? new HooklessNodes(cloud, ec2Client, store, { [clusterTagKey({ clusterName: CLUSTER_NAME })]: 'owned' }, say)
      : new NodeGroup(cloud, asg, store, say);
    const subnetIds = options.podSubnet ? [network.subnetIds[0]!] : network.subnetIds;
    await group.scaleOut(options.nodes, options.instanceType, subnetIds, HOOK_TIMEOUT_S);

    const datapath = await chooseDatapath({
      cloud,
      hostNet,
      tableName: TABLE_NAME,
      localDir: options.localDir,
      reuseWaitMs: REUSE_WAIT_MS,
      controlPlaneOnly: options.controlPlaneOnly,
      ipFamily: options.ipFamily,
      say,
    });
    const pods = datapath.driver;
    driver = pods;
    const dep = deployment;
    const topUp = async (): Promise<void> => {
      await dep.invokePoolManager();
      for (const id of group.inService) await pods.prepareNode(id);
    };
    const workload = new Workload({
      driver: pods,
      store,
      region: cloud.region,
      accountId: cloud.accountId,
      topUp,
      runId: hostNet.runId,
      concurrency: options.parallel,
      retryDelayMs: REUSE_WAIT_MS / 2,
      progress: say,
    });
    // What a scheduler would place per node: max pods minus the host-network pods, which need no address.
    const capacity = new Map<string, number>();
    for (const id of group.inService) {
      const maxPods = (await store.getNode(group.arnOf(id)))?.maxPods ?? 0;
      capacity.set(id, Math.max(0, maxPods - DEFAULT_HOST_NETWORK_PODS));
      await pods.prepareNode(id);
    }
    const placed = await workload.start(options.pods, capacity);
    if (placed < options.pods)
      say(`pods: the nodes hold ${placed} pods, not ${options.pods} (max pods per node minus host-network pods)`);
    say(`pods: ${workload.running.size}/${options.pods} running (${workload.addFailures} failed ADDs)`);
    await workload.checkHolders(3);

    for (let round = 1; round <= options.churnRounds; round += 1) {
      await workload.churn(capacity);
      await topUp();
      say(
        `churn ${round}/${options.churnRounds}: ${workload.running.size} pods running, ${workload.deleted} deleted so far`,
      );
    }

    // A node goes: its pods drain first (as kubectl drain does), then Auto Scaling terminates it.
    const victim = [...group.inService][0];
    if (victim && options.nodes > 1) {
      const drained = workload.podsOn(victim);
      await workload.stop(drained);
      say(`terminating ${victim} after draining its ${drained.length} pods`);
      await group.terminate(victim);
      capacity.delete(victim);
      await pods.forgetNode(victim);
      say(`  ${victim} terminated; node item GONE, its ENIs deleted with the instance`);
    } else say('one node only: no termination (--nodes 2 or more to see one)');

    await workload.checkHolders(3);
    await dep.invokePoolManager();
    const reconcile = await dep.invokeReconciler();
    say(
      `reconcile: ${reconcile.enisSeen} ENIs seen, ${reconcile.marked.length} marked, ${reconcile.partitionsRemoved.length} partitions removed, ${reconcile.drift.length} drift`,
    );
    // Let redelivered and re-enqueued events drain before judging.
    await until('event queue drained', () => {
      const c = dep.queue.counts();
      return c.visible + c.inFlight + c.delayed === 0 && dep.mapping.stats().inFlightInvocations === 0;
    });
    const ec2Counts = cloud.ec2.admin.counts();
    const checked = await checkAll({
      ec2,
      store,
      clusterName: CLUSTER_NAME,
      minLeases: 8,
      workloadViolations: workload.violations,
      dlqMessages: dep.dlq.counts().visible + dep.dlq.counts().inFlight,
      iam: { cloud, tableName: TABLE_NAME, instanceIds: [...group.inService] },
    });
    const report = await buildReport({
      options,
      startedMs,
      clusterName: CLUSTER_NAME,
      store,
      ec2,
      ec2Counts,
      deployment: dep,
      group,
      workload,
      driver: pods,
      datapathReason: datapath.reason,
      hostNet,
      reconcile,
      checked,
    });
    return {
      report,
      cloud,
      deployment: dep,
      vpcId: network.vpcId,
      subnetIds: network.subnetIds,
      agents: () => pods.agents?.() ?? [],
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
