import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../shared/clock.js';
import { ValidationError } from '../../shared/errors.js';
import { formatViolations } from '../../shared/invariants/checker.js';
import { createLifecycleRecordHandler } from '../../shared/lifecycle/record-handler.js';
import { launchEventBody, stateChangeEventBody, terminateEventBody } from './support/events.js';
import { Harness } from './support/harness.js';

async function waitFor(what: string, predicate: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; i < 400; i += 1) {
    if (await predicate()) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('Function: runTerminate (EC2 simulator + dynalite)', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await Harness.start();
  });
  afterEach(async () => {
    await h.close();
  });

  const podEnis = (id: string) => h.ec2.describeNetworkInterfaces({ tags: { 'vpc-lease:instance-id': id } });
  const terminated = (id: string) => h.sim.api.getInstance(id)?.state === 'terminated';

  it('drains a READY node on the terminate hook: no lease, GONE audit item, ENIs go with the instance', async () => {
    const id = h.launchInstance('m5.large');
    await h.drive(launchEventBody(id));
    const token = 'terminate-token-1';
    await h.drive(terminateEventBody(id, { token }));

    const arn = h.instanceArnOf(id);
    const node = await h.store.getNode(arn);
    expect(node?.phase).toBe('GONE');
    expect(node?.enis.map((e) => e.step)).toEqual(['DELETING', 'DELETING']);
    expect(await h.store.listLeases(arn)).toHaveLength(0);
    expect(h.autoScaling.completed.find((c) => c.ref.token === token)?.result).toBe('CONTINUE');
    // The instance is still running during the hook: its pod ENIs stay attached, marked DeleteOnTermination.
    expect((await podEnis(id)).every((e) => e.attachment?.deleteOnTermination)).toBe(true);

    h.sim.api.terminateInstance(id);
    await waitFor('instance terminated', () => terminated(id));
    expect(await podEnis(id)).toHaveLength(0);
    await h.drive(stateChangeEventBody(id, 'terminated'));
    expect(formatViolations(await h.check())).toBe('');
  });

  it('cleans up on the EC2 terminated state change for instances without a hook', async () => {
    const id = h.launchInstance('t3.medium');
    await h.drive(launchEventBody(id));
    h.sim.api.terminateInstance(id);
    await waitFor('instance terminated', () => terminated(id));
    await h.drive(stateChangeEventBody(id, 'terminated'));

    const arn = h.instanceArnOf(id);
    expect((await h.store.getNode(arn))?.phase).toBe('GONE');
    expect(await h.store.listLeases(arn)).toHaveLength(0);
    expect(await podEnis(id)).toHaveLength(0);
    expect(formatViolations(await h.check())).toBe('');
  });

  it('deletes pod ENIs that lacked DeleteOnTermination once the instance is gone', async () => {
    const id = h.launchInstance('m5.large');
    await h.drive(launchEventBody(id));
    // An operator (or a crash before the modify) left one ENI without DeleteOnTermination.
    const [first] = await podEnis(id);
    await h.ec2.setDeleteOnTermination(first!.eniId, first!.attachment!.attachmentId, false);
    h.sim.api.terminateInstance(id);
    await waitFor('instance terminated', () => terminated(id));
    await waitFor('ENI detached', async () => (await podEnis(id)).every((e) => !e.attachment));
    expect(await podEnis(id)).toHaveLength(1);
    await h.drive(stateChangeEventBody(id, 'terminated'));

    expect(await podEnis(id)).toHaveLength(0);
    expect(formatViolations(await h.check())).toBe('');
  });

  it('is a harmless no-op for unknown and already gone instances, and still completes the hook', async () => {
    const id = h.launchInstance('m5.large');
    h.sim.api.terminateInstance(id);
    await h.drive(stateChangeEventBody('i-0123456789abcdef0', 'terminated'));
    await h.drive(terminateEventBody(id, { token: 'tok-a' }));
    await h.drive(terminateEventBody(id, { token: 'tok-a' }));

    expect(h.autoScaling.completed.map((c) => c.result)).toEqual(['CONTINUE']);
    expect(h.autoScaling.goneCalls).toBe(1);
    expect(await h.store.getNode(h.instanceArnOf('i-0123456789abcdef0'))).toBeUndefined();
    expect(formatViolations(await h.check())).toBe('');
  });

  it('makes a launch event that arrives after the terminate event a no-op', async () => {
    const id = h.launchInstance('m5.large');
    await h.drive(terminateEventBody(id));
    await h.drive(launchEventBody(id));

    expect((await h.store.getNode(h.instanceArnOf(id)))?.phase).toBe('GONE');
    expect(await podEnis(id)).toHaveLength(0);
    expect(await h.store.listLeases(h.instanceArnOf(id))).toHaveLength(0);
    expect(formatViolations(await h.check())).toBe('');
  });

  it('makes a launch event for an instance EC2 already terminated a no-op', async () => {
    const id = h.launchInstance('t3.medium');
    h.sim.api.terminateInstance(id);
    await waitFor('instance terminated', () => terminated(id));
    await h.drive(stateChangeEventBody(id, 'terminated'));
    await h.drive(launchEventBody(id));

    expect(await h.store.getNode(h.instanceArnOf(id))).toBeUndefined();
    expect(h.metrics.total('Ec2Calls', { Action: 'CreateNetworkInterface' })).toBe(0);
    expect(formatViolations(await h.check())).toBe('');
  });

  it('fails the record (for SQS to redeliver, then dead-letter) on a body that is not an event', async () => {
    await expect(createLifecycleRecordHandler(h.deps())('{"detail-type":')).rejects.toThrow(ValidationError);
    await expect(createLifecycleRecordHandler(h.deps())('{"hello":"world"}')).resolves.toBeUndefined();
  });

  it('stops a launch in progress when the terminate arrives, leaving no lease and no unprotected ENI', async () => {
    h.sim.admin.pauseAttachments();
    const id = h.launchInstance('m5.large');
    const launch = launchEventBody(id);
    await createLifecycleRecordHandler(h.deps())(launch);
    const resumed = h.requeue.queued.at(-1)!.body;
    await h.drive(terminateEventBody(id));
    h.sim.admin.resumeAttachments();
    await h.drive(resumed);

    const arn = h.instanceArnOf(id);
    expect((await h.store.getNode(arn))?.phase).toBe('GONE');
    expect(await h.store.listLeases(arn)).toHaveLength(0);
    expect((await podEnis(id)).every((e) => e.attachment?.deleteOnTermination)).toBe(true);
    expect(h.autoScaling.resultFor(id)).toEqual(['CONTINUE']); // the terminate hook's; the launch never completed
    expect(formatViolations(await h.check())).toBe('');
  });
});

describe('Heartbeats while a launch waits', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await Harness.start({ config: { heartbeatTimeoutS: 30 } });
  });
  afterEach(async () => {
    await h.close();
  });

  it('records a heartbeat on every wait, whatever the clock says, and counts the waited seconds', async () => {
    const clock = new ManualClock(Date.now());
    h.clock = clock;
    h.sim.admin.pauseAttachments();
    const id = h.launchInstance('c5.4xlarge');
    let body = launchEventBody(id, { timeMs: clock.nowMs() });
    const markers: { heartbeatAtMs: number; waitedS: number }[] = [];
    // The clock stands still for the first two waits: a heartbeat must not depend on elapsed time.
    for (const advanceMs of [0, 0, 6_000, 2_000]) {
      clock.advance(advanceMs);
      const before = h.requeue.queued.length;
      await createLifecycleRecordHandler(h.deps())(body);
      body = h.requeue.queued[before]!.body;
      markers.push(JSON.parse(body).vpcLease);
    }
    expect(h.autoScaling.heartbeats).toHaveLength(4);
    const t0 = markers[0]!.heartbeatAtMs;
    expect(markers.map((m) => m.heartbeatAtMs - t0)).toEqual([0, 0, 6_000, 8_000]);
    expect(markers.map((m) => m.waitedS)).toEqual([1, 2, 3, 4]);
  });
});
