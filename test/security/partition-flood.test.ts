import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { afterEach, describe, expect, it } from 'vitest';
import { A, leaseKey, NODE_WRITABLE_ATTRS } from '../../shared/lease-store/item-codec.js';
import { itemBytes, PARTITION_READ_MAX_BYTES } from '../../shared/lease-store/partition-bound.js';
import { METRIC_NAMES } from '../../shared/metrics.js';
import { sweepPools } from '../../shared/pool/sweep.js';
import { reconcilePaced } from '../../shared/reconcile/paced.js';
import { DynamoSweepCursorStore } from '../../shared/schedule/cursor.js';
import { claimOne, type PoolEnv, type ReadyNode, readyNode, startPoolEnv } from '../pool/support.js';
import { pacedDeps } from '../reconcile/support/harness.js';

let env: PoolEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

const MIB = 1024 * 1024;
/** 64 items of ~390 KB: ~25 MB, past the bound by half again (the attack suite shows IAM accepts both kinds). */
const FLOOD_ITEMS = 64;
const POD_NAME_BYTES = 390_000;
/** A Query or Scan page is at most 1 MB: a reader that stops at the bound has read at most one page past it. */
const READ_LIMIT_BYTES = PARTITION_READ_MAX_BYTES + MIB;

/**
 * What a compromised node can do with its own credentials: upsert lease-shaped items into its own partition,
 * naming only attributes the node policy lets it write, each with a 390 KB pod name.
 */
async function flood(e: PoolEnv, arn: string): Promise<void> {
  const attrs: Record<string, AttributeValue> = {
    [A.state]: { S: 'FREE' },
    [A.version]: { N: '1' },
    [A.cAt]: { N: '0' },
    [A.podName]: { S: 'x'.repeat(POD_NAME_BYTES) },
  };
  const names = Object.keys(attrs);
  if (names.some((n) => !(NODE_WRITABLE_ATTRS as readonly string[]).includes(n)))
    throw new Error('the flood names an attribute the node policy refuses');
  for (let i = 0; i < FLOOD_ITEMS; i++)
    await e.api.updateItem({
      TableName: e.tableName,
      Key: leaseKey(arn, `10.0.250.${i}`),
      UpdateExpression: `SET ${names.map((_, j) => `#a${j} = :v${j}`).join(', ')}`,
      ExpressionAttributeNames: Object.fromEntries(names.map((n, j) => [`#a${j}`, n])),
      ExpressionAttributeValues: Object.fromEntries(names.map((n, j) => [`:v${j}`, attrs[n]!])),
    });
}

/**
 * Bytes of `arn`'s items the control plane got back: the most one Query (all its pages) returned, and what the
 * Scans returned since `reset` — what a reader holds at once, and what a census run reads.
 */
function meterReads(e: PoolEnv, arn: string): { query: () => number; scan: () => number; reset: () => void } {
  let chain = 0;
  let maxChain = 0;
  let scanned = 0;
  const bytesOf = (items: readonly Record<string, AttributeValue>[] | undefined): number =>
    (items ?? []).reduce((sum, item) => sum + (item[A.pk]?.S === arn ? itemBytes(item) : 0), 0);
  const api = e.api;
  const query = api.query.bind(api);
  const scan = api.scan.bind(api);
  api.query = async (input) => {
    const page = await query(input);
    chain = (input.ExclusiveStartKey ? chain : 0) + bytesOf(page.Items);
    maxChain = Math.max(maxChain, chain);
    return page;
  };
  api.scan = async (input) => {
    const page = await scan(input);
    scanned += bytesOf(page.Items);
    return page;
  };
  return {
    query: () => maxChain,
    scan: () => scanned,
    reset: () => {
      scanned = 0;
    },
  };
}

async function battlefield(): Promise<{ e: PoolEnv; attacker: ReadyNode; victims: ReadyNode[] }> {
  const e = await startPoolEnv();
  env = e;
  const attacker = await readyNode(e);
  const victims = [await readyNode(e), await readyNode(e)];
  await flood(e, attacker.instanceArn);
  return { e, attacker, victims };
}

describe('Security: a node floods its own partition past anything the control plane writes', () => {
  it('the pool sweep reads at most the bound of it, fails that node alone and passes every other node', async () => {
    const { e, attacker, victims } = await battlefield();
    const meter = meterReads(e, attacker.instanceArn);

    const swept = await sweepPools(e.deps());

    expect(meter.query()).toBeLessThanOrEqual(READ_LIMIT_BYTES);
    expect(swept.failed).toEqual([attacker.instanceArn]);
    expect(swept.reports.map((r) => r.instanceArn).sort()).toEqual(victims.map((v) => v.instanceArn).sort());
    for (const v of victims) expect((await claimOne(e, v.instanceArn)).ip).toMatch(/^10\.0\./);
  }, 400_000);

  it('the hourly count reads at most the bound’s pages of it, fails that node alone and counts every other node', async () => {
    const { e, attacker, victims } = await battlefield();
    const query = e.api.query.bind(e.api);
    let countPages = 0;
    e.api.query = async (input) => {
      if (input.Select === 'COUNT' && input.ExpressionAttributeValues?.[':arn']?.S === attacker.instanceArn)
        countPages += 1;
      return query(input);
    };

    const swept = await sweepPools(e.deps({ sweepCursor: new DynamoSweepCursorStore(e.api, e.tableName) }));

    // A COUNT returns no items, but each page but the last read 1 MB: the page count bounds what was read.
    expect(countPages).toBeGreaterThan(0);
    expect(countPages).toBeLessThanOrEqual(PARTITION_READ_MAX_BYTES / MIB + 1);
    expect(swept.failed).toEqual([attacker.instanceArn]);
    expect(swept.skippedInBand).toBe(victims.length);
  }, 400_000);

  it('the census scans at most the bound of it in any run, moves past it and still looks at every other node', async () => {
    const { e, attacker, victims } = await battlefield();
    // A victim with an interrupted release, which only the census's look lists as due.
    const victim = victims[0]!;
    await e.store.markReleasing(victim.instanceArn, victim.node.enis[0]!.addresses[0]!, e.clock.nowMs());
    e.clock.advance(121_000);
    const meter = meterReads(e, attacker.instanceArn);
    // Each Scan page costs a second of the run's time: a run stops at its deadline as the Lambda's does.
    const scan = e.api.scan.bind(e.api);
    e.api.scan = async (input) => {
      e.clock.advance(1_000);
      return scan(input);
    };
    const reconciler = pacedDeps(e, { cursor: new DynamoSweepCursorStore(e.api, e.tableName) });

    const perRun: number[] = [];
    const due = new Set<string>();
    const oversized: string[] = [];
    let judged = 0;
    for (let scanning = true; scanning; ) {
      if (perRun.length >= 80) throw new Error(`the census never finished: ${perRun.length} runs`);
      meter.reset();
      const run = await reconcilePaced(reconciler, e.clock.nowMs() + 3_000);
      perRun.push(meter.scan());
      for (const arn of run.poolDue) due.add(arn);
      oversized.push(...run.strays.oversized);
      judged += run.strays.judged;
      scanning = run.strays.scanning;
    }

    expect(Math.max(...perRun)).toBeLessThanOrEqual(READ_LIMIT_BYTES);
    expect(meter.query()).toBeLessThanOrEqual(READ_LIMIT_BYTES);
    expect(due.has(victim.instanceArn)).toBe(true);
    expect(e.logs.some((l) => l.includes(attacker.instanceArn) && l.includes('left unread'))).toBe(true);
    // Reported once as oversized (and counted for the alarm), never judged as a possible stray: its node is live.
    expect(oversized).toEqual([attacker.instanceArn]);
    expect(e.metrics.total(METRIC_NAMES.reconcilerOversizedPartitions)).toBe(1);
    expect(judged).toBe(0);
  }, 400_000);
});
