import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ClaimHints, HintedLeaseStore } from '../../node/store/claim-hints.js';
import { instanceArn } from '../../shared/domain/arn.js';
import type { DynamoApi } from '../../shared/dynamo/api.js';
import { createSdkDynamoApi } from '../../shared/dynamo/sdk-client.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import { LeaseTable } from '../../shared/lease-store/dynamo-lease-table.js';
import type { LeaseStore } from '../../shared/lease-store/port.js';
import { createTableInput } from '../../shared/lease-store/table.js';
import { type DynaliteHandle, startDynalite } from '../support/dynalite.js';

const credentials = { accessKeyId: 'test', secretAccessKey: 'test' };
const arn = instanceArn('us-east-1', '123456789012', 'i-0123456789abcdef0', 'aws');
const holder = (id: string) => ({ containerId: id, ifName: 'eth0', netns: `/var/run/netns/${id}` });
const T0 = 1_800_000_000_000;

/** A DynamoApi that counts the operations sent and can fail one updateItem after it reached the table. */
function counting(api: DynamoApi) {
  const counts: Record<string, number> = {};
  let failNextUpdateAfterWrite = false;
  const wrapped = new Proxy(api, {
    get(target, key: string) {
      const fn = Reflect.get(target, key) as (input: unknown) => Promise<unknown>;
      return async (input: unknown) => {
        counts[key] = (counts[key] ?? 0) + 1;
        const out = await fn.call(target, input);
        if (key === 'updateItem' && failNextUpdateAfterWrite) {
          failNextUpdateAfterWrite = false;
          throw Object.assign(new Error('socket hang up'), { name: 'TimeoutError' });
        }
        return out;
      };
    },
  });
  return {
    api: wrapped,
    counts,
    reset: () => {
      for (const k of Object.keys(counts)) delete counts[k];
    },
    loseNextUpdateResponse: () => {
      failNextUpdateAfterWrite = true;
    },
  };
}

/**
 * The hint logic against dynalite directly, with a counting seam the IAM endpoint would not give. The hinted
 * claim's one UpdateItem under the node policy is test/node/plugin-netns.test.ts's request-budget test: the
 * plugin's ADD after a DEL, signed with the instance session, through the IAM-enforcing endpoint, no denial.
 */
describe('claim hints: a claim with no Query, confirmed by the conditional write', () => {
  let dynalite: DynaliteHandle;
  let dir: string;
  let plain: LeaseStore;
  let wire: ReturnType<typeof counting>;
  let hinted: LeaseStore;
  let hints: ClaimHints;
  let tableName: string;
  let n = 0;

  beforeAll(async () => {
    dynalite = await startDynalite();
  });
  afterAll(async () => {
    await dynalite.close();
  });

  beforeEach(async () => {
    tableName = `hints-${n++}`;
    const ddb = new DynamoDBClient({ endpoint: dynalite.endpoint, region: 'us-east-1', credentials });
    await ddb.send(new CreateTableCommand(createTableInput(tableName)));
    ddb.destroy();
    const api = createSdkDynamoApi({ endpoint: dynalite.endpoint, region: 'us-east-1', credentials });
    plain = new DynamoLeaseStore({ api, tableName });
    wire = counting(api);
    dir = mkdtempSync(join(tmpdir(), 'vpc-lease-hints-'));
    hints = new ClaimHints(dir);
    const table = new LeaseTable({
      api: wire.api,
      tableName,
      batchRetries: 0,
      sleep: async () => {},
      random: Math.random,
    });
    hinted = new HintedLeaseStore(new DynamoLeaseStore({ api: wire.api, tableName }), table, hints);
    const lease = (i: number) => ({
      instanceArn: arn,
      ip: `10.1.0.${10 + i}`,
      eniId: 'eni-0aaaaaaa',
      deviceIndex: 1,
      mac: '02:00:00:00:00:01',
      subnetId: 'subnet-0aaaaaaa',
      subnetCidr: '10.1.0.0/24',
      gateway: '10.1.0.1',
    });
    await plain.putLeases([lease(0), lease(1), lease(2)], T0);
    return () => rmSync(dir, { recursive: true, force: true });
  });

  it('claims the lease a DEL released with one UpdateItem and no Query, once its cooldown is over', async () => {
    const first = await hinted.claim(arn, holder('a'), T0 + 1, { checkExisting: false });
    await hinted.release(arn, holder('a'), T0 + 2, 1000, first.ip);
    expect(readdirSync(dir)).toHaveLength(1);
    wire.reset();
    // Still cooling down: the hint is not used (the Query path picks among the others).
    const during = await hinted.claim(arn, holder('b'), T0 + 500, { checkExisting: false });
    expect(during.ip).not.toBe(first.ip);
    expect(wire.counts['query']).toBe(1);
    wire.reset();
    const after = await hinted.claim(arn, holder('c'), T0 + 1002, { checkExisting: false });
    expect(after).toMatchObject({ ip: first.ip, state: 'CLAIMED', holder: { containerId: 'c' } });
    expect(wire.counts).toEqual({ updateItem: 1 });
    expect(readdirSync(dir)).toEqual([]);
  });

  it('a stale hint loses its conditional write and the claim falls back to the Query, never taking the lease', async () => {
    const first = await hinted.claim(arn, holder('a'), T0 + 1, { checkExisting: false });
    await hinted.release(arn, holder('a'), T0 + 2, 0, first.ip);
    // The pool manager starts returning it to EC2 meanwhile: the hint's version and state are stale.
    await plain.markReleasing(arn, first.ip, T0 + 3);
    wire.reset();
    const c = await hinted.claim(arn, holder('c'), T0 + 10, { checkExisting: false });
    expect(c.ip).not.toBe(first.ip);
    expect(c.state).toBe('CLAIMED');
    expect((await plain.getLease(arn, first.ip))?.state).toBe('RELEASING');
    expect(wire.counts).toEqual({ updateItem: 2, query: 1 });
  });

  it('a hinted write whose answer is lost is found again by the full claim: no second lease', async () => {
    const first = await hinted.claim(arn, holder('a'), T0 + 1, { checkExisting: false });
    await hinted.release(arn, holder('a'), T0 + 2, 0, first.ip);
    wire.loseNextUpdateResponse();
    const c = await hinted.claim(arn, holder('c'), T0 + 10, { checkExisting: false });
    expect(c.ip).toBe(first.ip);
    const claimed = (await plain.listLeases(arn)).filter((l) => l.state === 'CLAIMED');
    expect(claimed.map((l) => [l.ip, l.holder?.containerId])).toEqual([[first.ip, 'c']]);
  });

  it("a claim that must look for the holder's own lease ignores hints", async () => {
    const first = await hinted.claim(arn, holder('a'), T0 + 1, { checkExisting: false });
    await hinted.release(arn, holder('a'), T0 + 2, 0, first.ip);
    wire.reset();
    await hinted.claim(arn, holder('d'), T0 + 10);
    expect(wire.counts['query']).toBeGreaterThanOrEqual(1);
    expect(readdirSync(dir)).toHaveLength(1);
  });

  it('passes every other method to the inner store unchanged', async () => {
    const lease = await plain.claim(arn, holder('a'), T0 + 1, { checkExisting: false });
    expect(await hinted.getLease(arn, lease.ip)).toEqual(lease);
    expect(await hinted.findByHolder(arn, 'a', 'eth0')).toEqual(lease);
    expect((await hinted.listLeases(arn)).map((l) => l.ip).sort()).toEqual(['10.1.0.10', '10.1.0.11', '10.1.0.12']);
    expect(await hinted.countClaimable(arn, T0 + 1)).toBe(2);
    expect(await hinted.getNode(arn)).toBeUndefined();
    expect(await hinted.deleteNodePartition(arn)).toBe(3);
    expect(await plain.listLeases(arn)).toEqual([]);
  });

  it('hands one hint to one taker only, and skips names that are not hints', () => {
    const lease = { ip: '10.1.0.99', state: 'COOLDOWN', reusableAtMs: T0, version: 4 } as never;
    hints.add(lease);
    writeFileSync(join(dir, 'garbage'), '');
    const other = new ClaimHints(dir);
    expect(hints.take(T0)).toEqual({ ip: '10.1.0.99', version: 4 });
    expect(other.take(T0)).toBeUndefined();
    expect(readdirSync(dir)).toEqual(['garbage']);
  });
});
