import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatViolations } from '../../shared/invariants/checker.js';
import { createLifecycleRecordHandler } from '../../shared/lifecycle/record-handler.js';
import { CrashSwitch } from './support/crash.js';
import { launchEventBody, terminateEventBody } from './support/events.js';
import { Harness } from './support/harness.js';

/** Calls of one clean launch (EC2 only, or every port's), counted the way the crash switch counts them. */
async function cleanLaunchCalls(h: Harness, type: string, countAll = false): Promise<string[]> {
  const id = h.launchInstance(type);
  const sw = new CrashSwitch();
  let body: string | undefined = launchEventBody(id);
  while (body) {
    const before = h.requeue.queued.length;
    await createLifecycleRecordHandler(h.deps(sw, {}, countAll))(body);
    body = h.requeue.queued[before]?.body;
  }
  expect((await h.store.getNode(h.instanceArnOf(id)))?.phase).toBe('READY');
  return sw.log;
}

// Each test drives a launch per crash point; on a loaded machine that outlasts vitest's 30 s default. The guard
// only stops a hang: nothing here depends on speed.
const HANG_GUARD_MS = 300_000;

describe('Crash between every pair of EC2 calls, then redelivery', { timeout: HANG_GUARD_MS }, () => {
  let h: Harness;
  beforeAll(async () => {
    h = await Harness.start();
  });
  afterAll(async () => {
    await h.close();
  });

  for (const type of ['m5.large', 'c5.4xlarge']) {
    it(`creates no extra ENI and loses no lease for a ${type} whatever call the crash follows`, async () => {
      const calls = await cleanLaunchCalls(h, type);
      expect(calls.filter((c) => c.endsWith('createNetworkInterface')).length).toBeGreaterThan(0);
      for (let crashAt = 1; crashAt <= calls.length; crashAt += 1) {
        const id = h.launchInstance(type);
        const invocations = await h.drive(launchEventBody(id), { crashAt });

        const arn = h.instanceArnOf(id);
        const node = await h.store.getNode(arn);
        const where = `crash after call ${crashAt} (${calls[crashAt - 1]})`;
        expect(node?.phase, where).toBe('READY');
        expect(invocations, where).toBeGreaterThanOrEqual(2);
        const enis = await h.ec2.describeNetworkInterfaces({ tags: { 'vpc-lease:instance-id': id } });
        expect(enis.length, where).toBe(node?.enis.length);
        expect(new Set(enis.map((e) => e.eniId)), where).toEqual(new Set(node?.enis.map((e) => e.eniId)));
        const leases = await h.store.listLeases(arn);
        const assigned = enis.flatMap((e) => e.secondaryIps).sort();
        expect(leases.map((l) => l.ip).sort(), where).toEqual(assigned);
        expect(h.autoScaling.resultFor(id), where).toEqual(['CONTINUE']);
      }
      expect(formatViolations(await h.check())).toBe('');
    });
  }

  it('resumes to READY whatever await of the launch steps the crash follows (node writes and completion too)', async () => {
    // Every phase step ends in a node write, and the finishing point in CompleteLifecycleAction: counting
    // every port's calls puts a crash after each of them, not only between EC2 calls.
    const calls = await cleanLaunchCalls(h, 'm5.large', true);
    for (const step of [
      'store.createNode',
      'store.updateNode',
      'store.putLeases',
      'autoScaling.completeLifecycleAction',
    ])
      expect(calls, step).toContain(step);
    for (let crashAt = 1; crashAt <= calls.length; crashAt += 1) {
      const id = h.launchInstance('m5.large');
      await h.drive(launchEventBody(id), { crashAt, countAll: true });
      const arn = h.instanceArnOf(id);
      const node = await h.store.getNode(arn);
      const where = `crash after call ${crashAt} (${calls[crashAt - 1]})`;
      expect(node?.phase, where).toBe('READY');
      const enis = await h.ec2.describeNetworkInterfaces({ tags: { 'vpc-lease:instance-id': id } });
      expect(new Set(enis.map((e) => e.eniId)), where).toEqual(new Set(node?.enis.map((e) => e.eniId)));
      const assigned = enis.flatMap((e) => e.secondaryIps).sort();
      expect((await h.store.listLeases(arn)).map((l) => l.ip).sort(), where).toEqual(assigned);
      expect(h.autoScaling.resultFor(id), where).toEqual(['CONTINUE']);
    }
    expect(formatViolations(await h.check())).toBe('');
  });

  it('leaves no lease and no unprotected ENI whatever call a terminate crashes after', async () => {
    const id0 = h.launchInstance('m5.large');
    await h.drive(launchEventBody(id0));
    const sw = new CrashSwitch();
    await createLifecycleRecordHandler(h.deps(sw))(terminateEventBody(id0));
    const calls = sw.log.length;
    expect(calls).toBeGreaterThan(0);

    for (let crashAt = 1; crashAt <= calls; crashAt += 1) {
      const id = h.launchInstance('m5.large');
      await h.drive(launchEventBody(id));
      await h.drive(terminateEventBody(id), { crashAt });
      const arn = h.instanceArnOf(id);
      expect((await h.store.getNode(arn))?.phase).toBe('GONE');
      expect(await h.store.listLeases(arn)).toHaveLength(0);
    }
    expect(formatViolations(await h.check())).toBe('');
  });
});
