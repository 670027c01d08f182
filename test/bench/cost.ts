import { LightDynamoClient } from '../../shared/dynamo/light-client.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import { ControlPlaneCloud, TABLE, waitFor } from './control-plane-cloud.js';
import { type RequestCounter, startRequestCounter } from './request-counter.js';
import { round } from './stats.js';

export interface CostBenchOptions {
  readonly nodes: number;
  readonly pods: number;
  readonly seed: number;
}

/** The lifecycle function's memory (infra/construct/allocator.ts). */
const LIFECYCLE_MEMORY_GB = 0.5;
const READ_OPERATIONS = new Set(['GetItem', 'Query', 'Scan', 'BatchGetItem']);

interface Snapshot {
  readonly invocations: number;
  readonly handlerMs: number;
  readonly requests: number;
  readonly readUnits: number;
  readonly writeUnits: number;
}

function snapshot(c: ControlPlaneCloud, dynamo: RequestCounter): Snapshot {
  let readUnits = 0;
  let writeUnits = 0;
  for (const [op, units] of dynamo.units) {
    if (READ_OPERATIONS.has(op)) readUnits += units;
    else writeUnits += units;
  }
  return {
    invocations: c.mapping.stats().invocations,
    handlerMs: c.handlerMs.reduce((s, ms) => s + ms, 0),
    requests: dynamo.total(),
    readUnits,
    writeUnits,
  };
}

function per(a: Snapshot, b: Snapshot, count: number, scale: number) {
  const f = (x: number): number => round((x / count) * scale, 1);
  return {
    lambdaInvocations: f(b.invocations - a.invocations),
    lambdaGbSeconds: f(((b.handlerMs - a.handlerMs) / 1000) * LIFECYCLE_MEMORY_GB),
    dynamoRequests: f(b.requests - a.requests),
    dynamoReadUnits: f(b.readUnits - a.readUnits),
    dynamoWriteUnits: f(b.writeUnits - a.writeUnits),
  };
}

/**
 * `cost`: what the control plane and the nodes consume, from counted requests — Lambda invocations and
 * GB-seconds of the lifecycle function (handler wall time × its 512 MB) per 1,000 node launches and per 1,000
 * node terminations, and DynamoDB requests and capacity units (as DynamoDB computes them from item sizes:
 * dynalite's ConsumedCapacity) per 1,000 launches and per 1,000,000 pod starts (ADD + DEL of the plugin's
 * store calls through the CNI's own client). The launches run at AWS's pace with the latency model, so
 * handler time includes the EC2 round trips it really waits for.
 */
export async function runCostBench(options: CostBenchOptions): Promise<Record<string, unknown>> {
  const c = await ControlPlaneCloud.start({
    timeScale: 1,
    seed: options.seed,
    ec2: { latency: true, throttling: true },
  });
  let pods: RequestCounter | undefined;
  try {
    const start = snapshot(c, c.dynamo);
    c.createGroup('cost', 'm5.large', options.nodes);
    const launched = await waitFor(() => {
      const instances = c.groupInstances('cost');
      return (
        instances.length === options.nodes && instances.every((i) => i.lifecycleState === 'InService') && instances
      );
    }, 180_000);
    if (!launched) throw new Error(`the ${options.nodes} launches did not complete`);
    await waitFor(() => c.inFlight === 0 && c.queue.counts().visible + c.queue.counts().inFlight === 0, 30_000);
    const afterLaunch = snapshot(c, c.dynamo);

    // Pod starts on one READY node: the plugin's exact store calls (Query + UpdateItem, then UpdateItem).
    const node = c.arnOf(launched[0]!.instanceId);
    pods = await startRequestCounter(c.cloud.endpoints.dynamodb, { capacity: true });
    const store = new DynamoLeaseStore({
      api: new LightDynamoClient({
        endpoint: pods.endpoint,
        region: c.cloud.region,
        credentials: async () => ({ accessKeyId: 'node', secretAccessKey: 'node' }),
      }),
      tableName: TABLE,
    });
    const add = { requests: 0, read: 0, write: 0 };
    const del = { requests: 0, read: 0, write: 0 };
    const take = (into: typeof add): void => {
      into.requests += pods!.total();
      for (const [op, units] of pods!.units) {
        if (READ_OPERATIONS.has(op)) into.read += units;
        else into.write += units;
      }
      pods!.reset();
    };
    for (let i = 0; i < options.pods; i++) {
      const holder = { containerId: `cost-${i}`, ifName: 'eth0', netns: `/var/run/netns/cost-${i}` };
      const lease = await store.claim(node, holder, Date.now(), { checkExisting: false });
      take(add);
      await store.release(node, holder, Date.now(), 0, lease.ip);
      take(del);
    }
    const perMillion = (x: number): number => round((x / options.pods) * 1_000_000);

    c.cloud.autoScaling.simulator.setDesiredCapacity('cost', 0);
    const gone = await waitFor(async () => {
      const nodes = await c.deps.store.listNodes();
      return (
        c.groupInstances('cost').length === 0 &&
        c.inFlight === 0 &&
        c.queue.counts().visible + c.queue.counts().inFlight === 0 &&
        nodes.every((n) => n.phase === 'GONE')
      );
    }, 180_000);
    const afterTerminate = snapshot(c, c.dynamo);
    return {
      nodes: options.nodes,
      instanceType: 'm5.large',
      lifecycleMemoryGb: LIFECYCLE_MEMORY_GB,
      per1000NodeLaunches: per(start, afterLaunch, options.nodes, 1000),
      per1000NodeTerminations: gone ? per(afterLaunch, afterTerminate, options.nodes, 1000) : 'did not settle',
      podsMeasured: options.pods,
      per1MillionPodStarts: {
        dynamoRequests: perMillion(add.requests + del.requests),
        dynamoReadUnits: perMillion(add.read + del.read),
        dynamoWriteUnits: perMillion(add.write + del.write),
        // Each claim takes the lease out of the sparse claimable index and each release puts it back: DynamoDB
        // bills one more write unit on the index for each (dynalite reports the table's units only).
        claimableIndexWriteUnitsEstimate: 2_000_000,
        // The stream carries both writes; the pool-manager's mapping batches up to 100 records per 1 s window.
        streamRecords: 2_000_000,
        poolManagerInvocationsAtFullBatches: 20_000,
        ec2Calls: 0,
      },
      perPodStart: {
        addRequests: round(add.requests / options.pods),
        delRequests: round(del.requests / options.pods),
        addReadUnits: round(add.read / options.pods),
        addWriteUnits: round(add.write / options.pods),
        delWriteUnits: round(del.write / options.pods),
      },
    };
  } finally {
    await pods?.close();
    await c.close();
  }
}
