import type { DynamoDBRecord, DynamoDBStreamEvent, ScheduledEvent } from 'aws-lambda';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../shared/clock.js';
import { parseControlPlaneConfig } from '../../shared/config/control-plane.js';
import type { Ec2Port } from '../../shared/ec2/port.js';
import type { LeaseStore } from '../../shared/lease-store/port.js';
import { silentLogger } from '../../shared/log.js';
import { createPoolManagerHandler, isPoolTrigger, nodesOfStream } from '../../shared/pool/events.js';
import type { SweepReport } from '../../shared/pool/sweep.js';
import { MemoryLeaseStore } from '../support/memory-lease-store.js';
import { claimOne, invariantViolations, type PoolEnv, readyNode, startPoolEnv } from './support.js';

const arn = (n: number): string => `arn:aws:ec2:us-east-1:123456789012:instance/i-0000000000000000${n}`;

let sequence = 0;
function record(
  pk: string,
  sk: string,
  oldImage: Record<string, string> | undefined,
  newImage: Record<string, string> | undefined,
): DynamoDBRecord {
  sequence += 1;
  const image = (fields: Record<string, string>) =>
    Object.fromEntries(Object.entries({ pk, sk, ...fields }).map(([k, v]) => [k, { S: v }]));
  return {
    eventName: !oldImage ? 'INSERT' : !newImage ? 'REMOVE' : 'MODIFY',
    dynamodb: {
      Keys: { pk: { S: pk }, sk: { S: sk } },
      SequenceNumber: String(sequence),
      ...(oldImage ? { OldImage: image(oldImage) } : {}),
      ...(newImage ? { NewImage: image(newImage) } : {}),
    },
  };
}

const claim = (n: number, ip: string) => record(arn(n), `ip#${ip}`, { st: 'FREE' }, { st: 'CLAIMED' });
const release = (n: number, ip: string) => record(arn(n), `ip#${ip}`, { st: 'CLAIMED' }, { st: 'COOLDOWN' });

describe('Pool-manager handler: stream records', () => {
  it('wakes up on claims, releases and a node turning READY, not on its own writes', () => {
    expect(isPoolTrigger(claim(1, '10.0.0.1'))).toBe(true);
    expect(isPoolTrigger(release(1, '10.0.0.1'))).toBe(true);
    expect(isPoolTrigger(record(arn(1), 'node', { ph: 'PROVISIONING' }, { ph: 'READY' }))).toBe(true);
    expect(isPoolTrigger(record(arn(1), 'node', { ph: 'READY' }, { ph: 'READY' }))).toBe(false);
    expect(isPoolTrigger(record(arn(1), 'ip#10.0.0.1', undefined, { st: 'FREE' }))).toBe(false);
    expect(isPoolTrigger(record(arn(1), 'ip#10.0.0.1', { st: 'FREE' }, { st: 'RELEASING' }))).toBe(false);
    expect(isPoolTrigger(record(arn(1), 'ip#10.0.0.1', { st: 'RELEASING' }, undefined))).toBe(false);
  });

  it('runs one pass per node and reports only the failed node’s records', async () => {
    const store = new MemoryLeaseStore();
    const passes: string[] = [];
    const watched = new Proxy(store, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver);
        if (prop !== 'listLeases') return typeof value === 'function' ? value.bind(target) : value;
        return async (instanceArn: string) => {
          passes.push(instanceArn);
          if (instanceArn === arn(1)) throw new Error('injected: store down for node 1');
          return store.listLeases(instanceArn);
        };
      },
    }) as LeaseStore;
    const handler = createPoolManagerHandler({
      ec2: {} as Ec2Port,
      store: watched,
      config: parseControlPlaneConfig({}),
      clock: new ManualClock(),
      logger: silentLogger,
    });
    const failing = [claim(1, '10.0.0.1'), claim(1, '10.0.0.2'), release(1, '10.0.0.3')];
    const event: DynamoDBStreamEvent = {
      Records: [
        failing[0]!,
        claim(2, '10.0.1.1'),
        failing[1]!,
        record(arn(3), 'ip#10.0.2.1', { st: 'FREE' }, { st: 'RELEASING' }),
        record(arn(4), 'node', { ph: 'PROVISIONING' }, { ph: 'READY' }),
        failing[2]!,
        claim(2, '10.0.1.2'),
      ],
    };
    expect([...nodesOfStream(event).keys()]).toEqual([arn(1), arn(2), arn(4)]);

    const out = await handler(event);

    expect(passes.sort()).toEqual([arn(1), arn(2), arn(4)]);
    expect(out).toEqual({
      batchItemFailures: failing.map((r) => ({ itemIdentifier: r.dynamodb!.SequenceNumber! })),
    });
  });
});

describe('Pool-manager handler: schedule', () => {
  let env: PoolEnv | undefined;
  afterEach(async () => {
    await env?.close();
    env = undefined;
  });

  it('sweeps every READY node and leaves none under the low watermark', async () => {
    env = await startPoolEnv();
    const low = await readyNode(env, { enis: [{ ipCount: 4 }] });
    const fine = await readyNode(env, { enis: [{ ipCount: 6 }] });
    for (let i = 0; i < 3; i++) await claimOne(env, low.instanceArn);
    const handler = createPoolManagerHandler(env.deps());
    const scheduled = { source: 'aws.events', 'detail-type': 'Scheduled Event', detail: {} } as ScheduledEvent;

    const report = (await handler(scheduled)) as SweepReport;

    expect(report.nodes).toBe(2);
    expect(report.failed).toEqual([]);
    expect(report.lowOnLeases).toBe(0);
    expect(report.reports.find((r) => r.instanceArn === low.instanceArn)?.leased.length).toBeGreaterThan(0);
    expect(report.reports.find((r) => r.instanceArn === fine.instanceArn)?.leased).toEqual([]);
    expect(await env.store.countClaimable(low.instanceArn, env.clock.nowMs())).toBeGreaterThanOrEqual(
      env.config.warmLowLeases,
    );
    // The gauge the alarm watches, flushed as an EMF line at the end of the invocation.
    expect(env.logs.some((l) => l.includes('"NodesLowOnClaimableLeases":0'))).toBe(true);
    expect(await invariantViolations(env)).toBe('');
  });
});
