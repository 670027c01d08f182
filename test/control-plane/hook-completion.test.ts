import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../shared/clock.js';
import { parseLifecycleEvent } from '../../shared/lifecycle/events.js';
import { abandonLaunch } from '../../shared/lifecycle/launch.js';
import { createLifecycleRecordHandler } from '../../shared/lifecycle/record-handler.js';
import { launchEventBody } from './support/events.js';
import { Harness } from './support/harness.js';

/** The hook-hold time: the node item records when the launch completed its lifecycle action (issue 22). */
describe('hook completion time on the node item', () => {
  let h: Harness;
  let clock: ManualClock;
  beforeEach(async () => {
    h = await Harness.start();
    clock = new ManualClock(Date.now());
    h.clock = clock;
  });
  afterEach(async () => {
    await h?.close();
  });

  /** The first invocation, left waiting on an attachment: the hook is still held. */
  async function launchHeld(): Promise<{ id: string; arn: string; body: string }> {
    h.sim.admin.pauseAttachments();
    const id = h.launchInstance('m5.large');
    const body = launchEventBody(id);
    await createLifecycleRecordHandler(h.deps())(body);
    return { id, arn: h.instanceArnOf(id), body };
  }

  it('is absent while the hook holds the instance and set at the CONTINUE, once', async () => {
    const { id, arn, body } = await launchHeld();
    const held = await h.store.getNode(arn);
    expect(held?.phase).toBe('PROVISIONING');
    expect(held?.hookCompletedAtMs).toBeUndefined();
    expect(h.autoScaling.completed).toHaveLength(0);

    clock.advance(7_250);
    h.sim.admin.resumeAttachments();
    await h.drive(h.requeue.queued[0]!.body);
    const ready = await h.store.getNode(arn);
    expect(ready?.phase).toBe('READY');
    expect(h.autoScaling.resultFor(id)).toEqual(['CONTINUE']);
    expect(ready!.hookCompletedAtMs! - ready!.createdAtMs).toBe(7_250);

    // A late duplicate finds the action gone: it does not move the recorded time.
    clock.advance(60_000);
    await h.drive(body);
    expect(h.autoScaling.goneCalls).toBe(1);
    expect((await h.store.getNode(arn))?.hookCompletedAtMs).toBe(ready!.hookCompletedAtMs);
  });

  it('is set at the ABANDON too', async () => {
    const { id, arn, body } = await launchHeld();
    clock.advance(3_000);
    const event = parseLifecycleEvent(body);
    if (event.kind !== 'launch') throw new Error(`not a launch event: ${event.kind}`);
    await abandonLaunch(h.deps(), event, 'test: given up');
    const failed = await h.store.getNode(arn);
    expect(failed?.phase).toBe('FAILED');
    expect(h.autoScaling.resultFor(id)).toEqual(['ABANDON']);
    expect(failed!.hookCompletedAtMs! - failed!.createdAtMs).toBe(3_000);
  });
});
