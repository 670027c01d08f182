import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { DynamoDBRecord, DynamoDBStreamEvent, ScheduledEvent } from 'aws-lambda';
import { ManualClock } from '../../shared/clock.js';
import { parseControlPlaneConfig } from '../../shared/config/control-plane.js';
import { instanceArn } from '../../shared/domain/arn.js';
import type { EniRecord, NodeRecord } from '../../shared/domain/node.js';
import { SdkDynamoApi } from '../../shared/dynamo/sdk-client.js';
import type { Ec2Eni, Ec2Port } from '../../shared/ec2/port.js';
import { ENI_TAGS } from '../../shared/ec2/tags.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import { ensureTable } from '../../shared/lease-store/ensure-table.js';
import { A, encodeNewLease, encodeNode, type Item } from '../../shared/lease-store/item-codec.js';
import { createLogger } from '../../shared/log.js';
import { createPoolManagerHandler } from '../../shared/pool/events.js';
import { DynamoLeasePartitions } from '../../shared/reconcile/lease-partitions.js';
import { reconcilePaced } from '../../shared/reconcile/paced.js';
import { reconcile } from '../../shared/reconcile/reconciler.js';
import { DynamoSweepCursorStore } from '../../shared/schedule/cursor.js';
import { startDynalite } from '../support/dynalite.js';
import { round } from './stats.js';
import {
  dayMean,
  dollarsPer1000NodeMonths,
  meteredApi,
  type Parts,
  perNodeHourTable,
  scaleTally,
  type Tally,
  zero,
} from './steady-state-cost.js';

/**
 * Steady-state cost of the schedules and the stream at a cluster's scale: what DynamoDB bills per node-hour
 * (dynalite's ConsumedCapacity: 4 KB per strongly consistent read unit, half for eventual, 1 KB per write
 * unit; Query and Scan by the total size read before any filter), Lambda invocations and GB-s per node-hour,
 * and dollars per 1,000 node-months. The table is seeded directly (READY node items and their leases, as a
 * launch leaves them); the hour's schedule is simulated by invoking the pool-manager's scheduled entry every
 * `poolIntervalMs` and the reconciler every `reconcileIntervalMs` with a manual clock advanced between runs —
 * no real hour passes (the figures are
 * DynamoDB's and Lambda's; no EC2 call is billed). EC2 is a stub that shows every seeded ENI attached with its
 * leases' addresses: an idle cluster without drift.
 */
export interface SteadyStateOptions {
  readonly nodes: number;
  readonly leasesPerNode: number;
  readonly claimedPerNode: number;
  /** Pod starts (each an ADD and, later, a DEL) per node-hour; 0 = idle. */
  readonly podStartsPerNodeHour: number;
  /**
   * Schedule runs actually executed per schedule; the rest of the hour's runs are extrapolated from their
   * mean. Only for code whose every idle run does the same reads (main's full sweeps); undefined = run all.
   */
  readonly measuredRunsPerSchedule?: number;
  /**
   * paced: the Lambda's reconciler (reconcilePaced: node-index walk, digests, daily stray Scan); whole: one
   * `reconcile` pass over every node each run (what the Lambda ran before). Default paced.
   */
  readonly reconciler?: 'paced' | 'whole';
  /**
   * Simulated hours (default 2). The last is the steady hour reported in `perNodeHour`; the first carries the
   * once-a-day work (cycle 0 of each walk is a full one, the first stray Scan) and is reported as `firstHour`.
   */
  readonly hours?: number;
  /**
   * An unmetered hour a day before the measured ones (default: with the paced reconciler and every run
   * executed): it leaves what a running cluster has (drift digests, cursors, a census a day old), so the first
   * measured hour holds the daily work and not the one-off first look at a new table.
   */
  readonly warmUp?: boolean;
  /**
   * The schedule before the census (main fd41f45): the pool passes every node in full every 24th cycle and the
   * drift walk reads every node every 96th, each a day at the defaults, with cycle 0 in the first hour; the
   * census then only does the stray search's Scan. Implies no warm-up.
   */
  readonly dailyFullPasses?: boolean;
}

const POOL_INTERVAL_MS = 60_000; // infra/construct/props.ts poolInterval default
const RECONCILE_INTERVAL_MS = 300_000; // reconcileInterval default
const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;

/**
 * EC2 as the steady state sees it: every instance running and every seeded pod ENI attached with the
 * addresses its leases name (no drift, nothing to collect); any other call is a bench bug.
 */
function stubEc2(nodes: readonly NodeRecord[]): Ec2Port {
  const enis: Ec2Eni[] = nodes.flatMap((node) =>
    node.enis.map((e) => ({
      eniId: e.eniId!,
      subnetId: e.subnetId,
      vpcId: 'vpc-0bench000000000000',
      availabilityZone: node.availabilityZone,
      mac: e.mac!,
      primaryIp: '10.255.0.1',
      secondaryIps: e.addresses,
      prefixes: [],
      status: 'in-use',
      attachment: {
        attachmentId: e.attachmentId!,
        instanceId: node.instanceId,
        deviceIndex: e.deviceIndex,
        networkCardIndex: 0,
        status: 'attached',
        deleteOnTermination: true,
      },
      securityGroupIds: [],
      tags: { [ENI_TAGS.cluster]: 'bench', [ENI_TAGS.instance]: node.instanceId },
    })),
  );
  const known = {
    describeNetworkInterfaces: async () => enis,
    describeInstanceStates: async (ids: readonly string[]) => new Map(ids.map((id) => [id, 'running'])),
  };
  return new Proxy(known, {
    get(target, prop) {
      if (prop in target) return target[prop as keyof typeof target];
      if (prop === 'then') return undefined;
      return () => {
        throw new Error(`steady-state bench: unexpected EC2 call ${String(prop)}`);
      };
    },
  }) as unknown as Ec2Port;
}

function nodeRecord(i: number, nowMs: number, leases: number): NodeRecord {
  const instanceId = `i-${(0x10000000 + i).toString(16).padStart(17, '0')}`;
  const perEni = 10;
  const enis: EniRecord[] = [];
  for (let e = 0; e * perEni < leases; e++) {
    const count = Math.min(perEni, leases - e * perEni);
    enis.push({
      deviceIndex: e + 1,
      networkCardIndex: 0,
      subnetId: 'subnet-0bench00000000000',
      clientToken: `${instanceId}-${e + 1}-bench`,
      step: 'LEASED',
      eniId: `eni-${(i * 16 + e).toString(16).padStart(17, '0')}`,
      attachmentId: `eni-attach-${(i * 16 + e).toString(16).padStart(17, '0')}`,
      mac: `02:00:${((i >> 8) & 255).toString(16).padStart(2, '0')}:${(i & 255).toString(16).padStart(2, '0')}:00:0${e + 1}`,
      subnetCidr: '10.0.0.0/8',
      addresses: Array.from({ length: count }, (_, k) => addressOf(i, e * perEni + k)),
      prefixes: [],
      deleteOnTermination: true,
      plannedIpCount: count,
      plannedPrefixCount: 0,
    });
  }
  return {
    instanceArn: instanceArn('us-east-1', '123456789012', instanceId, 'aws'),
    instanceId,
    instanceType: 'm5.xlarge',
    availabilityZone: 'us-east-1a',
    podSubnetIds: ['subnet-0bench00000000000'],
    phase: 'READY',
    enis,
    maxPods: Math.max(58, leases + 10),
    createdAtMs: nowMs,
    updatedAtMs: nowMs,
    version: 3,
  };
}

function addressOf(node: number, k: number): string {
  const n = node * 128 + k + 16;
  return `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
}

/** Node item and leases as items: the first `claimed` CLAIMED by a pod, the rest FREE. */
function seedItems(node: NodeRecord, claimed: number, nowMs: number): Item[] {
  const items: Item[] = [encodeNode(node, node.version)];
  let k = 0;
  for (const eni of node.enis) {
    for (const ip of eni.addresses) {
      const item = encodeNewLease(
        {
          instanceArn: node.instanceArn,
          ip,
          eniId: eni.eniId!,
          deviceIndex: eni.deviceIndex,
          mac: eni.mac!,
          subnetId: eni.subnetId,
          subnetCidr: eni.subnetCidr!,
          gateway: '10.0.0.1',
        },
        nowMs - HOUR_MS,
      );
      if (k++ < claimed) {
        delete item[A.cAt];
        item[A.state] = { S: 'CLAIMED' };
        item[A.containerId] = { S: `${'c'.repeat(48)}${String(k).padStart(16, '0')}` };
        item[A.ifName] = { S: 'eth0' };
        item[A.netns] = { S: `/var/run/netns/cni-${'0'.repeat(28)}${k}` };
        item[A.podNamespace] = { S: 'default' };
        item[A.podName] = { S: `app-7d9f8c6b5-${String(k).padStart(5, 'x')}` };
        item[A.claimedAt] = { N: String(nowMs - HOUR_MS) };
      }
      items.push(item);
    }
  }
  return items;
}

function streamRecord(arn: string, ip: string, before: string, after: string, seq: number): DynamoDBRecord {
  return {
    eventName: 'MODIFY',
    dynamodb: {
      Keys: { [A.pk]: { S: arn }, [A.sk]: { S: `ip#${ip}` } },
      OldImage: { [A.state]: { S: before } },
      NewImage: { [A.state]: { S: after } },
      SequenceNumber: String(seq),
    },
  } as DynamoDBRecord;
}

/**
 * One simulated hour at steady state: the pool schedule, the reconciler's, and (with churn) each pod's ADD and
 * DEL through the store plus the stream pass each triggers (one record per invocation: the worst case, a
 * stream whose batches hold one record).
 */
export async function runSteadyState(options: SteadyStateOptions): Promise<Record<string, unknown>> {
  const dynalite = await startDynalite();
  const client = new DynamoDBClient({
    endpoint: dynalite.endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'AKIDLOCAL', secretAccessKey: 'local-secret' },
  });
  const tableName = 'steady-state';
  const meter: { current: Tally | undefined } = { current: undefined };
  try {
    await ensureTable(client, tableName, { pollMs: 10 });
    const raw = new SdkDynamoApi(client);
    const api = meteredApi(raw, meter);
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const startMs = clock.nowMs();
    const nodes = Array.from({ length: options.nodes }, (_, i) => nodeRecord(i, startMs, options.leasesPerNode));
    const seedStarted = Date.now();
    let batch: Item[] = [];
    const flush = async (): Promise<void> => {
      let requests = batch.map((Item) => ({ PutRequest: { Item } }));
      batch = [];
      while (requests.length > 0) {
        const out = await raw.batchWriteItem({ RequestItems: { [tableName]: requests } });
        requests = (out.UnprocessedItems?.[tableName] ?? []) as typeof requests;
      }
    };
    for (const node of nodes) {
      for (const item of seedItems(node, options.claimedPerNode, startMs)) {
        batch.push(item);
        if (batch.length === 25) await flush();
      }
    }
    await flush();
    const seedS = round((Date.now() - seedStarted) / 1000, 1);

    const config = parseControlPlaneConfig({
      clusterName: 'bench',
      tableName,
      maxPods: Math.max(58, options.leasesPerNode + 10),
    });
    const logger = createLogger({ level: 'error', sink: () => {} });
    const store = new DynamoLeaseStore({ api, tableName });
    const ec2 = stubEc2(nodes);
    // The Lambda's wiring (lambdas/pool-manager/handler.ts): the sweep's cursor in the schedules partition.
    const sweepCursor = new DynamoSweepCursorStore(api, tableName);
    const before = options.dailyFullPasses === true ? { fullPassEveryCycles: 24, driftFullEveryCycles: 96 } : {};
    const pool = createPoolManagerHandler({ ec2, store, config, clock, logger, sweepCursor, ...before });
    const reconcilerDeps = {
      ec2,
      store,
      config,
      clock,
      logger,
      leasePartitions: new DynamoLeasePartitions(api, tableName),
      cursor: sweepCursor,
      ...before,
    };
    const paced = (options.reconciler ?? 'paced') === 'paced';
    const hours = options.hours ?? 2;
    const scheduled = { source: 'aws.events', 'detail-type': 'Scheduled Event', detail: {} } as ScheduledEvent;
    const hourTallies = () => ({ poolSchedule: zero(), reconciler: zero(), pods: zero(), stream: zero() });
    const byHour = Array.from({ length: hours }, hourTallies);
    const warmTallies = hourTallies();
    let tallies = byHour[0]!;
    const warmUp =
      options.warmUp ?? (paced && options.measuredRunsPerSchedule === undefined && options.dailyFullPasses !== true);
    const dayStartMs = warmUp ? startMs + DAY_MS : startMs;
    const measured = { poolSchedule: 0, reconciler: 0 };
    const invoke = async (into: Tally, fn: () => Promise<unknown>): Promise<void> => {
      meter.current = into;
      const t0 = performance.now();
      await fn();
      into.handlerMs += performance.now() - t0;
      into.invocations += 1;
      meter.current = undefined;
    };

    // Pod churn spread over the hour: pod k starts at a fixed time and stops half an hour later.
    const podsTotal = Math.round(options.podStartsPerNodeHour * options.nodes);
    const events: { atMs: number; run: () => Promise<void> }[] = [];
    let seq = 0;
    for (let k = 0; k < podsTotal * hours; k++) {
      const node = nodes[k % nodes.length]!;
      const holder = { containerId: `churn-${k}`.padEnd(64, '0'), ifName: 'eth0', netns: `/var/run/netns/churn-${k}` };
      const hour = Math.floor(k / Math.max(1, podsTotal));
      const atMs =
        dayStartMs + hour * HOUR_MS + Math.floor(((k % Math.max(1, podsTotal)) * HOUR_MS) / 2 / Math.max(1, podsTotal));
      let ip = '';
      events.push({
        atMs,
        run: async () => {
          meter.current = tallies.pods;
          ip = (await store.claim(node.instanceArn, holder, clock.nowMs(), { checkExisting: false })).ip;
          meter.current = undefined;
          const event = { Records: [streamRecord(node.instanceArn, ip, 'FREE', 'CLAIMED', ++seq)] };
          await invoke(tallies.stream, () => pool(event as DynamoDBStreamEvent));
        },
      });
      events.push({
        atMs: atMs + HOUR_MS / 2,
        run: async () => {
          meter.current = tallies.pods;
          await store.release(node.instanceArn, holder, clock.nowMs(), config.reuseWaitMs, ip);
          meter.current = undefined;
          const event = { Records: [streamRecord(node.instanceArn, ip, 'CLAIMED', 'COOLDOWN', ++seq)] };
          await invoke(tallies.stream, () => pool(event as DynamoDBStreamEvent));
        },
      });
    }
    const limit = options.measuredRunsPerSchedule ?? Number.POSITIVE_INFINITY;
    for (let at = 0; warmUp && at < HOUR_MS; at += POOL_INTERVAL_MS)
      events.push({ atMs: startMs + at + 1, run: () => invoke(tallies.poolSchedule, () => pool(scheduled)) });
    for (let at = 0; warmUp && at < HOUR_MS; at += RECONCILE_INTERVAL_MS)
      events.push({
        atMs: startMs + at + 2,
        run: () => invoke(tallies.reconciler, () => reconcilePaced(reconcilerDeps, Number.POSITIVE_INFINITY)),
      });
    for (let at = 0; at < hours * HOUR_MS; at += POOL_INTERVAL_MS) {
      events.push({
        atMs: dayStartMs + at + 1,
        run: async () => {
          if (measured.poolSchedule++ < limit) await invoke(tallies.poolSchedule, () => pool(scheduled));
        },
      });
    }
    for (let at = 0; at < hours * HOUR_MS; at += RECONCILE_INTERVAL_MS) {
      events.push({
        atMs: dayStartMs + at + 2,
        run: async () => {
          if (measured.reconciler++ < limit)
            await invoke(tallies.reconciler, () =>
              paced ? reconcilePaced(reconcilerDeps, Number.POSITIVE_INFINITY) : reconcile(reconcilerDeps),
            );
        },
      });
    }
    events.sort((a, b) => a.atMs - b.atMs);
    const runStarted = Date.now();
    for (const event of events) {
      if (event.atMs > clock.nowMs()) clock.set(event.atMs);
      tallies =
        event.atMs < dayStartMs
          ? warmTallies
          : byHour[Math.min(hours - 1, Math.floor((event.atMs - dayStartMs) / HOUR_MS))]!;
      await event.run();
    }
    const runS = round((Date.now() - runStarted) / 1000, 1);

    // Extrapolate the schedules' unexecuted runs from the executed ones' mean (identical idle runs).
    const scaled = (t: Tally, executed: number, total: number): Tally =>
      scaleTally(t, executed > 0 ? total / executed : 0, total);
    const poolRuns = HOUR_MS / POOL_INTERVAL_MS;
    const reconcileRuns = HOUR_MS / RECONCILE_INTERVAL_MS;
    if (hours > 1 && limit !== Number.POSITIVE_INFINITY) throw new Error('extrapolated runs need hours: 1');
    const partsOf = (t: ReturnType<typeof hourTallies>): Parts => ({
      poolSchedule: scaled(t.poolSchedule, Math.min(limit, poolRuns), poolRuns),
      reconciler: scaled(t.reconciler, Math.min(limit, reconcileRuns), reconcileRuns),
      stream: t.stream,
      pods: t.pods,
    });
    const steady = partsOf(byHour[hours - 1]!);
    const first = partsOf(byHour[0]!);
    const day = hours > 1 ? dayMean(steady, first) : steady;
    return {
      nodes: options.nodes,
      leasesPerNode: options.leasesPerNode,
      claimedPerNode: options.claimedPerNode,
      podStartsPerNodeHour: options.podStartsPerNodeHour,
      reconciler: paced ? 'paced' : 'whole',
      hoursSimulated: hours,
      warmUpHour: warmUp,
      schedule: options.dailyFullPasses === true ? 'daily full passes (before)' : 'census',
      scheduleRunsPerHour: { poolSchedule: poolRuns, reconciler: reconcileRuns },
      scheduleRunsExecuted: {
        poolSchedule: Math.min(limit, poolRuns * hours),
        reconciler: Math.min(limit, reconcileRuns * hours),
      },
      /** The last simulated hour: what an ordinary hour of the day costs. */
      perNodeHour: perNodeHourTable(steady, options.nodes),
      ...(hours > 1
        ? {
            /** The first hour of a day: the census (one Scan, the daily first looks), which recurs once a day. */
            firstHour: perNodeHourTable(first, options.nodes),
            /** The day's mean: (first + 23 × steady) / 24; the dollars below are from it. */
            perNodeHourDayMean: perNodeHourTable(day, options.nodes),
          }
        : {}),
      dollarsPer1000NodeMonths: dollarsPer1000NodeMonths(day, options.nodes),
      seedS,
      runS,
    };
  } finally {
    client.destroy();
    await dynalite.close();
  }
}
