import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { judgeStatus } from '../../node/plugin/status.js';
import type { NodeRecord } from '../../shared/domain/node.js';
import { formatViolations } from '../../shared/invariants/checker.js';
import { parseLifecycleEvent } from '../../shared/lifecycle/events.js';
import { createLifecycleRecordHandler } from '../../shared/lifecycle/record-handler.js';
import { launchEventBody, stateChangeEventBody } from './support/events.js';
import { Harness } from './support/harness.js';

const CLUSTER_TAG = { 'kubernetes.io/cluster/test': 'owned' };
const MUTATING = ['CreateNetworkInterface', 'AttachNetworkInterface', 'ModifyNetworkInterfaceAttribute'];

/** What the node binary's STATUS says for this node item (node/plugin/status.ts), the store having answered. */
function statusFor(node: NodeRecord | undefined): string | undefined {
  return judgeStatus({ nowMs: 0, readyThisBoot: false, store: { kind: 'answered', node } }).unavailable;
}

describe('Launch without a lifecycle hook (EC2 state change; simulator + dynalite)', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await Harness.start();
  });
  afterEach(async () => {
    await h.close();
  });

  const launchTagged = (type: string, tags: Record<string, string> = CLUSTER_TAG): string =>
    h.sim.api.launchInstance({ instanceType: type, subnetId: h.subnetId, tags }).instanceId;
  const node = (id: string) => h.store.getNode(h.instanceArnOf(id));
  const podEnis = (id: string) => h.ec2.describeNetworkInterfaces({ tags: { 'vpc-lease:instance-id': id } });
  const mutatingCalls = (): number => MUTATING.reduce((sum, a) => sum + (h.sim.admin.counts()[a]?.calls ?? 0), 0);

  it('parses pending and running as launches without a hook, other states as state changes', () => {
    const id = 'i-0123456789abcdef0';
    for (const state of ['pending', 'running']) {
      const event = parseLifecycleEvent(stateChangeEventBody(id, state));
      expect(event).toMatchObject({ kind: 'launch', instanceId: id });
      expect(event.kind === 'launch' && event.lifecycle).toBeUndefined();
    }
    expect(parseLifecycleEvent(stateChangeEventBody(id, 'stopping'))).toMatchObject({ kind: 'state-change' });
  });

  it('brings a cluster-tagged instance to READY from its pending event, with no Auto Scaling call', async () => {
    const id = launchTagged('m5.large');
    expect(statusFor(await node(id))).toMatch(/not provisioned yet: no node item/);
    await h.drive(stateChangeEventBody(id, 'pending'));

    const ready = await node(id);
    expect(ready?.phase).toBe('READY');
    expect(ready?.lifecycle).toBeUndefined();
    expect(ready?.enis.map((e) => e.addresses.length)).toEqual([9, 7]);
    expect(await h.store.listLeases(h.instanceArnOf(id))).toHaveLength(16);
    expect(h.autoScaling.completed).toHaveLength(0);
    expect(h.autoScaling.heartbeats).toHaveLength(0);
    // The node binary's STATUS lets pods in only now.
    expect(statusFor(ready)).toBeUndefined();
    expect(formatViolations(await h.check())).toBe('');
  });

  it('ignores an instance without the cluster tag (negative control): no item, no ENI, no mutating call', async () => {
    const id = launchTagged('m5.large', { 'kubernetes.io/cluster/another': 'owned', Name: 'web' });
    await h.drive(stateChangeEventBody(id, 'pending'));
    await h.drive(stateChangeEventBody(id, 'running'));

    expect(await node(id)).toBeUndefined();
    expect(await podEnis(id)).toHaveLength(0);
    expect(mutatingCalls()).toBe(0);
    expect(h.callsByAction()['DescribeInstances']).toBe(2);
  });

  it('provisions an instance tagged with a configured key', async () => {
    h.configure({ clusterTagKey: 'karpenter.sh/nodepool' });
    const id = launchTagged('t3.medium', { 'karpenter.sh/nodepool': 'default' });
    const untagged = launchTagged('t3.medium');
    await h.drive(stateChangeEventBody(id, 'running'));
    await h.drive(stateChangeEventBody(untagged, 'running'));

    expect((await node(id))?.phase).toBe('READY');
    // The default key no longer counts once another is configured.
    expect(await node(untagged)).toBeUndefined();
  });

  it('converges pending, running and their duplicates, all at once, on one provisioning', async () => {
    const id = launchTagged('c5.4xlarge');
    const pending = stateChangeEventBody(id, 'pending');
    const running = stateChangeEventBody(id, 'running');
    await Promise.all([h.drive(pending), h.drive(running), h.drive(pending), h.drive(running)]);

    const ready = await node(id);
    expect(ready?.phase).toBe('READY');
    expect(ready?.enis).toHaveLength(1);
    expect(await podEnis(id)).toHaveLength(1);
    // Racing invocations may each send the create; its ClientToken (recorded on the node item) makes one ENI.
    expect(h.sim.api.instanceInterfaces(id).filter((i) => i.deviceIndex > 0)).toHaveLength(1);
    expect(await h.store.listLeases(h.instanceArnOf(id))).toHaveLength(16);
    expect(formatViolations(await h.check())).toBe('');
  });

  it('defers a running event while the pending event provisions, so no Create or Attach is repeated', async () => {
    h.sim.admin.pauseAttachments();
    const id = launchTagged('m5.large');
    const handle = createLifecycleRecordHandler(h.deps());
    await handle(stateChangeEventBody(id, 'pending'));
    const driver = h.requeue.queued.at(-1)!.body;
    await handle(stateChangeEventBody(id, 'running'));
    const observer = h.requeue.queued.at(-1)!;
    expect(JSON.parse(observer.body).vpcLease).toMatchObject({ reason: 'another event is provisioning this node' });
    expect(h.sim.admin.counts()['CreateNetworkInterface']?.calls).toBe(2);

    h.sim.admin.resumeAttachments();
    await h.drive(driver);
    await h.drive(observer.body);
    expect((await node(id))?.phase).toBe('READY');
    expect(h.sim.admin.counts()['CreateNetworkInterface']?.calls).toBe(2);
    expect(h.sim.admin.counts()['AttachNetworkInterface']?.calls).toBe(2);
  });

  it('lets a deferred event take over when the provisioning event is gone (its driver crashed for good)', async () => {
    h.sim.admin.pauseAttachments();
    const id = launchTagged('t3.medium');
    // The pending event's invocation got as far as ATTACHING; its continuation is lost (say, in a DLQ).
    await createLifecycleRecordHandler(h.deps())(stateChangeEventBody(id, 'pending'));
    h.sim.admin.resumeAttachments();
    await h.drive(stateChangeEventBody(id, 'running'));
    expect((await node(id))?.phase).toBe('READY');
    expect(formatViolations(await h.check())).toBe('');
  });

  it('converges a launch hook event and the state change of the same instance; the hook completes once', async () => {
    const id = launchTagged('m5.large');
    const hook = launchEventBody(id, { token: 'hook-token' });
    await Promise.all([h.drive(stateChangeEventBody(id, 'pending')), h.drive(hook), h.drive(hook)]);

    expect((await node(id))?.phase).toBe('READY');
    expect(await podEnis(id)).toHaveLength(2);
    expect(h.autoScaling.resultFor(id)).toEqual(['CONTINUE']);
    expect(formatViolations(await h.check())).toBe('');
  });

  it('cleans up when the instance terminates during its hook-less provisioning', async () => {
    h.sim.admin.pauseAttachments();
    const id = launchTagged('m5.large');
    await createLifecycleRecordHandler(h.deps())(stateChangeEventBody(id, 'pending'));
    expect((await node(id))?.phase).toBe('PROVISIONING');
    const continuation = h.requeue.queued.at(-1)!.body;

    h.sim.admin.resumeAttachments();
    h.sim.api.terminateInstance(id);
    for (let i = 0; i < 400 && h.sim.api.getInstance(id)?.state !== 'terminated'; i += 1)
      await new Promise((resolve) => setTimeout(resolve, 10));
    await h.drive(stateChangeEventBody(id, 'terminated'));
    // The launch's own continuation then finds the node gone and stops.
    await h.drive(continuation);

    expect((await node(id))?.phase).toBe('GONE');
    expect(await h.store.listLeases(h.instanceArnOf(id))).toHaveLength(0);
    expect(await podEnis(id)).toHaveLength(0);
    expect(formatViolations(await h.check())).toBe('');
  });

  it('marks a hook-less node FAILED with its reason and the alarm metric, and leaves the instance running', async () => {
    const tiny = h.sim.admin.seedSubnet(h.vpcId, '10.0.8.0/28', 'us-east-1a').subnetId;
    h.configure({ minLeases: 16, podSubnetIds: [tiny] });
    const id = launchTagged('m5.large');
    await h.drive(stateChangeEventBody(id, 'running'));

    const failed = await node(id);
    expect(failed?.phase).toBe('FAILED');
    expect(failed?.failureReason).toMatch(/^subnets-exhausted: /);
    expect(h.metrics.total('LaunchAbandoned', { ClusterName: 'test', Reason: 'subnets-exhausted' })).toBe(1);
    expect(h.autoScaling.completed).toHaveLength(0);
    expect(h.sim.api.getInstance(id)?.state).not.toMatch(/shutting-down|terminated/);
    expect(await podEnis(id)).toHaveLength(0);
    expect(statusFor(failed)).toMatch(/failed provisioning: subnets-exhausted/);

    // A later event for it (the other state, a duplicate) changes nothing.
    await h.drive(stateChangeEventBody(id, 'pending'));
    expect((await node(id))?.failureReason).toBe(failed?.failureReason);
    expect(formatViolations(await h.check())).toBe('');
  });

  it('keeps STATUS NotReady while a hook-less launch is still provisioning', async () => {
    h.sim.admin.pauseAttachments();
    const id = launchTagged('t3.medium');
    await createLifecycleRecordHandler(h.deps())(stateChangeEventBody(id, 'pending'));
    expect(statusFor(await node(id))).toMatch(/not provisioned yet \(phase PROVISIONING\)/);
    h.sim.admin.resumeAttachments();
    await h.drive(h.requeue.queued.at(-1)!.body);
    expect(statusFor(await node(id))).toBeUndefined();
  });
});
