import type { SQSEvent } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../shared/errors.js';
import { parseLifecycleEvent, requeueBody } from '../../shared/lifecycle/events.js';
import { createLogger } from '../../shared/log.js';
import { Metrics } from '../../shared/metrics.js';
import { processSqsBatch } from '../../shared/queue/batch.js';
import { launchEventBody, sqsRecord, stateChangeEventBody, terminateEventBody } from './support/events.js';

const record = sqsRecord;

describe('Function: processSqsBatch', () => {
  it('reports exactly the records that threw, in batch order, and runs every record', async () => {
    const event: SQSEvent = { Records: ['a', 'b', 'c', 'd', 'e'].map((id) => record(id, id)) };
    const seen: string[] = [];
    const out = await processSqsBatch(event, async (r) => {
      seen.push(r.body);
      if (r.body === 'b' || r.body === 'e') throw new Error(`bad ${r.body}`);
    });
    expect(seen.sort()).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(out.batchItemFailures).toEqual([{ itemIdentifier: 'b' }, { itemIdentifier: 'e' }]);
  });

  it('keeps at most `concurrency` records in flight', async () => {
    let active = 0;
    let peak = 0;
    const event: SQSEvent = { Records: Array.from({ length: 12 }, (_, i) => record(String(i), String(i))) };
    await processSqsBatch(
      event,
      async () => {
        active += 1;
        peak = Math.max(peak, active);
        await new Promise((r) => setTimeout(r, 2));
        active -= 1;
      },
      { concurrency: 3 },
    );
    expect(peak).toBe(3);
  });

  it('returns no failures for an empty batch', async () => {
    expect(await processSqsBatch({ Records: [] }, async () => {})).toEqual({ batchItemFailures: [] });
  });
});

describe('Function: parseLifecycleEvent', () => {
  it('reads a launch lifecycle action with its hook reference and partition', () => {
    const e = parseLifecycleEvent(
      launchEventBody('i-0123456789abcdef0', { token: 'tok', groupName: 'g', hookName: 'h' }),
    );
    expect(e).toMatchObject({
      kind: 'launch',
      instanceId: 'i-0123456789abcdef0',
      region: 'us-east-1',
      accountId: '123456789012',
      partition: 'aws',
      lifecycle: { token: 'tok', autoScalingGroupName: 'g', hookName: 'h', instanceId: 'i-0123456789abcdef0' },
      retry: { attempt: 0 },
    });
  });

  it('reads terminate hooks and state changes, and ignores test notifications and other events', () => {
    expect(parseLifecycleEvent(terminateEventBody('i-0123456789abcdef0')).kind).toBe('terminate');
    expect(parseLifecycleEvent(stateChangeEventBody('i-0123456789abcdef0', 'terminated'))).toMatchObject({
      kind: 'state-change',
      state: 'terminated',
    });
    const test = JSON.parse(launchEventBody('i-0123456789abcdef0'));
    test.detail = { Event: 'autoscaling:TEST_NOTIFICATION', AutoScalingGroupName: 'g' };
    expect(parseLifecycleEvent(JSON.stringify(test)).kind).toBe('ignored');
    expect(parseLifecycleEvent(JSON.stringify({ hello: 1 })).kind).toBe('ignored');
  });

  it('rejects bodies that can never be handled', () => {
    expect(() => parseLifecycleEvent('not json')).toThrow(ValidationError);
    const bad = JSON.parse(launchEventBody('i-0123456789abcdef0'));
    bad.detail.EC2InstanceId = 'i-nothex';
    expect(() => parseLifecycleEvent(JSON.stringify(bad))).toThrow(/invalid EC2InstanceId/);
  });

  it('round-trips the progress marker through a re-enqueued body without touching the event', () => {
    const body = launchEventBody('i-0123456789abcdef0');
    const e = parseLifecycleEvent(body);
    if (e.kind !== 'launch') throw new Error('expected a launch');
    const again = parseLifecycleEvent(requeueBody(e, { attempt: 3, heartbeatAtMs: 42, reason: 'x' }));
    expect(again).toMatchObject({ kind: 'launch', retry: { attempt: 3, heartbeatAtMs: 42, reason: 'x' } });
    const { vpcLease, ...rest } = JSON.parse(requeueBody(e, { attempt: 3, heartbeatAtMs: 42 }));
    expect(vpcLease).toEqual({ attempt: 3, heartbeatAtMs: 42 });
    expect(rest).toEqual(JSON.parse(body));
  });

  it('carries EC2 tickets through a re-enqueue and drops a malformed set rather than trusting it', () => {
    const e = parseLifecycleEvent(launchEventBody('i-0123456789abcdef0'));
    if (e.kind !== 'launch') throw new Error('expected a launch');
    const tickets = {
      AttachNetworkInterface: [
        [1000, 1900],
        [2000, 2900],
      ] as [number, number][],
      ModifyNetworkInterfaceAttribute: [[500, 500]] as [number, number][],
    };
    expect(parseLifecycleEvent(requeueBody(e, { attempt: 1, heartbeatAtMs: 1, tickets }))).toMatchObject({
      retry: { tickets },
    });
    // A marker from before the window carried bare start times: each is a ticket with the grace only.
    const legacy = JSON.stringify({
      ...JSON.parse(launchEventBody('i-0123456789abcdef0')),
      vpcLease: { attempt: 1, tickets: { AttachNetworkInterface: [1000, 2000] } },
    });
    expect(parseLifecycleEvent(legacy)).toMatchObject({
      retry: {
        tickets: {
          AttachNetworkInterface: [
            [1000, 1000],
            [2000, 2000],
          ],
        },
      },
    });
    const malformed = [
      { AttachNetworkInterface: [[2000, 1000]] },
      { AttachNetworkInterface: [[1000, 2000, 3000]] },
      { AttachNetworkInterface: [[1000, 'later']] },
      { AttachNetworkInterface: ['soon'] },
      { AttachNetworkInterface: 5 },
      { AttachNetworkInterface: Array.from({ length: 65 }, (_, i) => i) },
      [1, 2],
    ];
    for (const bad of malformed) {
      const body = JSON.stringify({
        ...JSON.parse(launchEventBody('i-0123456789abcdef0')),
        vpcLease: { attempt: 1, tickets: bad },
      });
      const parsed = parseLifecycleEvent(body);
      expect(parsed).toMatchObject({ kind: 'launch', retry: { attempt: 1 } });
      expect(parsed.kind === 'launch' && parsed.retry.tickets).toBeFalsy();
    }
  });
});

describe('Class: Metrics', () => {
  it('writes one CloudWatch EMF line per metric and dimension set on flush, then starts over', () => {
    const lines: string[] = [];
    const metrics = new Metrics(
      createLogger({ sink: (l) => lines.push(l) }),
      'instance-lifecycle',
      () => 1_700_000_000_000,
    );
    metrics.add('Ec2Calls', { Action: 'CreateNetworkInterface' });
    metrics.add('Ec2Calls', { Action: 'CreateNetworkInterface' });
    metrics.add('Ec2Calls', { Action: 'AttachNetworkInterface' });
    metrics.flush();
    const parsed = lines.map((l) => JSON.parse(l));
    expect(parsed).toHaveLength(2);
    expect(parsed[0]).toMatchObject({
      _aws: {
        Timestamp: 1_700_000_000_000,
        CloudWatchMetrics: [
          {
            Namespace: 'VpcLease',
            Dimensions: [['Service', 'Action']],
            Metrics: [{ Name: 'Ec2Calls', Unit: 'Count' }],
          },
        ],
      },
      Service: 'instance-lifecycle',
      Action: 'CreateNetworkInterface',
      Ec2Calls: 2,
    });
    metrics.flush();
    expect(lines).toHaveLength(2);
    expect(metrics.totalsBy('Ec2Calls', 'Action')).toEqual({ CreateNetworkInterface: 2, AttachNetworkInterface: 1 });
  });
});
