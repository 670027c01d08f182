import { CreateTagsCommand } from '@aws-sdk/client-ec2';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatViolations } from '../../shared/invariants/checker.js';
import { createLifecycleRecordHandler } from '../../shared/lifecycle/record-handler.js';
import { launchEventBody } from './support/events.js';
import { Harness, type HarnessOptions } from './support/harness.js';

async function readyNode(h: Harness, id: string) {
  const node = await h.store.getNode(h.instanceArnOf(id));
  const leases = await h.store.listLeases(h.instanceArnOf(id));
  return { node, leases, ifaces: h.sim.api.instanceInterfaces(id).filter((i) => i.deviceIndex > 0) };
}

async function expectClean(h: Harness): Promise<void> {
  expect(formatViolations(await h.check())).toBe('');
}

describe('Function: runLaunch (EC2 simulator + dynalite)', () => {
  let h: Harness;
  const start = async (options?: HarnessOptions): Promise<void> => {
    h = await Harness.start(options);
  };
  afterEach(async () => {
    await h?.close();
  });

  describe('with default configuration', () => {
    beforeEach(() => start());

    it.each([
      ['m5.large', [9, 7]],
      ['c5.4xlarge', [16]],
      ['t3.medium', [5, 5]],
    ])('brings a %s to READY with ENIs of %j addresses and a lease per address', async (type, perEni) => {
      const id = h.launchInstance(type);
      await h.drive(launchEventBody(id));

      const { node, leases, ifaces } = await readyNode(h, id);
      expect(node?.phase).toBe('READY');
      expect(node?.enis.map((e) => e.addresses.length)).toEqual(perEni);
      expect(ifaces.map((i) => i.deviceIndex)).toEqual(perEni.map((_, i) => i + 1));
      expect(ifaces.every((i) => i.deleteOnTermination && i.attachmentState === 'attached')).toBe(true);
      expect(ifaces.every((i) => i.subnetId === h.subnetId)).toBe(true);
      // Exactly the ENIs' secondary addresses are leased, each on its own ENI and MAC.
      const expected = ifaces.flatMap((i) => i.privateIpAddresses.slice(1).map((ip) => `${ip}@${i.eniId}/${i.mac}`));
      expect(leases.map((l) => `${l.ip}@${l.eniId}/${l.mac}`).sort()).toEqual(expected.sort());
      expect(
        leases.every((l) => l.state === 'FREE' && l.gateway === '10.0.0.1' && l.subnetCidr === '10.0.0.0/22'),
      ).toBe(true);
      expect(h.autoScaling.resultFor(id)).toEqual(['CONTINUE']);
      await expectClean(h);
    });

    it('creates no extra ENI and completes once when the same event is delivered twice at once', async () => {
      const id = h.launchInstance('m5.large');
      const body = launchEventBody(id);
      await Promise.all([h.drive(body), h.drive(body), h.drive(body)]);

      const { node, leases, ifaces } = await readyNode(h, id);
      expect(node?.phase).toBe('READY');
      expect(ifaces).toHaveLength(2);
      expect(leases).toHaveLength(16);
      expect(h.autoScaling.resultFor(id)).toEqual(['CONTINUE']);
      const all = await h.ec2.describeNetworkInterfaces({ tags: { 'vpc-lease:instance-id': id } });
      expect(all).toHaveLength(2);
      await expectClean(h);
    });

    it('treats a late duplicate of a finished launch as a no-op', async () => {
      const id = h.launchInstance('t3.medium');
      const body = launchEventBody(id);
      await h.drive(body);
      h.metrics.resetTotals();
      await h.drive(body);

      expect(h.metrics.total('Ec2Calls', { Action: 'CreateNetworkInterface' })).toBe(0);
      expect(h.metrics.total('Ec2Calls')).toBe(0);
      expect((await readyNode(h, id)).ifaces).toHaveLength(2);
      expect(h.autoScaling.goneCalls).toBe(1);
      await expectClean(h);
    });

    it('survives lost responses of every mutating call (the SDK retries; ClientToken and read-back dedupe)', async () => {
      for (const action of ['CreateNetworkInterface', 'AttachNetworkInterface', 'ModifyNetworkInterfaceAttribute'])
        h.sim.admin.failNext({ action, code: 'InternalError', phase: 'after', count: 1 });
      const id = h.launchInstance('m5.large');
      await h.drive(launchEventBody(id));

      const { node, leases, ifaces } = await readyNode(h, id);
      expect(node?.phase).toBe('READY');
      expect(ifaces).toHaveLength(2);
      expect(leases).toHaveLength(16);
      expect(await h.ec2.describeNetworkInterfaces({ tags: { 'vpc-lease:instance-id': id } })).toHaveLength(2);
      expect(h.sim.admin.counts()['CreateNetworkInterface']?.faulted).toBe(1);
      await expectClean(h);
    });

    it('re-enqueues with a short delay and a heartbeat-carrying marker while an attachment is in progress', async () => {
      h.sim.admin.pauseAttachments();
      const id = h.launchInstance('c5.4xlarge');
      const body = launchEventBody(id);
      const { createLifecycleRecordHandler } = await import('../../shared/lifecycle/record-handler.js');
      await createLifecycleRecordHandler(h.deps())(body);

      expect((await h.store.getNode(h.instanceArnOf(id)))?.enis.map((e) => e.step)).toEqual(['ATTACHING']);
      expect(h.requeue.queued).toHaveLength(1);
      expect(h.requeue.queued[0]?.delayS).toBe(1);
      expect(JSON.parse(h.requeue.queued[0]!.body).vpcLease).toMatchObject({ attempt: 1 });
      expect(h.autoScaling.completed).toHaveLength(0);

      h.sim.admin.resumeAttachments();
      await h.drive(h.requeue.queued[0]!.body);
      expect((await h.store.getNode(h.instanceArnOf(id)))?.phase).toBe('READY');
      expect(h.sim.admin.counts()['CreateNetworkInterface']?.calls).toBe(1);
      await expectClean(h);
    });

    it('abandons with a recorded reason once the retries are spent', async () => {
      await h.close();
      await start({ retry: { maxWaitS: 3, attachingDelayS: 1, backoffBaseS: 1, backoffMaxS: 1 } });
      h.sim.admin.pauseAttachments();
      const id2 = h.launchInstance('t3.medium');
      await h.drive(launchEventBody(id2));

      const node = await h.store.getNode(h.instanceArnOf(id2));
      expect(node?.phase).toBe('FAILED');
      expect(node?.failureReason).toMatch(
        /^retries-exhausted: gave up after waiting 3 s over 3 attempts; last: attachments in progress/,
      );
      expect(h.autoScaling.resultFor(id2)).toEqual(['ABANDON']);
      expect(await h.store.listLeases(h.instanceArnOf(id2))).toHaveLength(0);
      // The attached ENIs got DeleteOnTermination so the abandoned instance takes them along.
      const enis = await h.ec2.describeNetworkInterfaces({ tags: { 'vpc-lease:instance-id': id2 } });
      expect(enis.length).toBeGreaterThan(0);
      expect(enis.every((e) => e.attachment?.deleteOnTermination)).toBe(true);
      h.sim.admin.resumeAttachments();
      await expectClean(h);
    });
  });

  it('leases every address of each /28 in prefix mode', async () => {
    await start({ config: { prefixDelegation: true, warmHighLeases: 32, maxPods: 110 } });
    const id = h.launchInstance('m5.large');
    await h.drive(launchEventBody(id));

    const { node, leases, ifaces } = await readyNode(h, id);
    expect(node?.phase).toBe('READY');
    expect(ifaces).toHaveLength(1);
    expect(ifaces[0]?.ipv4Prefixes).toHaveLength(2);
    expect(leases).toHaveLength(32);
    for (const l of leases) expect(ifaces[0]?.ipv4Prefixes).toContain(l.prefix);
    await expectClean(h);
  });

  it('puts pod ENIs in the tagged pod subnet of the instance AZ with the most room', async () => {
    await start({ config: { podSubnetTags: { 'vpc-lease/pods': 'yes' } } });
    const small = h.sim.admin.seedSubnet(h.vpcId, '10.0.8.0/26', 'us-east-1a').subnetId;
    const big = h.sim.admin.seedSubnet(h.vpcId, '10.0.9.0/24', 'us-east-1a').subnetId;
    const otherAz = h.sim.admin.seedSubnet(h.vpcId, '10.0.12.0/22', 'us-east-1b').subnetId;
    const untagged = h.sim.admin.seedSubnet(h.vpcId, '10.0.16.0/20', 'us-east-1a').subnetId;
    await h.ec2.client.send(
      new CreateTagsCommand({ Resources: [small, big, otherAz], Tags: [{ Key: 'vpc-lease/pods', Value: 'yes' }] }),
    );
    const id = h.launchInstance('m5.large');
    await h.drive(launchEventBody(id));

    const { node, leases, ifaces } = await readyNode(h, id);
    expect(node?.phase).toBe('READY');
    expect(ifaces.map((i) => i.subnetId)).toEqual([big, big]);
    expect(leases.every((l) => l.subnetCidr === '10.0.9.0/24' && l.gateway === '10.0.9.1')).toBe(true);
    expect(node?.podSubnetIds).not.toContain(otherAz);
    expect(node?.podSubnetIds).not.toContain(untagged);
    await expectClean(h);
  });

  it('moves an ENI to another pod subnet when EC2 says the planned one is full', async () => {
    await start({ config: { podSubnetTags: { pods: '1' } } });
    const a = h.sim.admin.seedSubnet(h.vpcId, '10.0.8.0/24', 'us-east-1a').subnetId;
    const b = h.sim.admin.seedSubnet(h.vpcId, '10.0.9.0/25', 'us-east-1a').subnetId;
    await h.ec2.client.send(new CreateTagsCommand({ Resources: [a, b], Tags: [{ Key: 'pods', Value: '1' }] }));
    h.sim.admin.failNext({ action: 'CreateNetworkInterface', code: 'InsufficientFreeAddressesInSubnet', count: 2 });
    const id = h.launchInstance('m5.large');
    await h.drive(launchEventBody(id));

    const { node, ifaces } = await readyNode(h, id);
    expect(node?.phase).toBe('READY');
    expect(ifaces.map((i) => i.subnetId)).toEqual([b, b]);
    await expectClean(h);
  });

  it('abandons with reason subnets-exhausted when every candidate subnet is out of addresses', async () => {
    await start();
    // A /28 has 11 usable addresses: one ENI of 9 fits, the second of 7 does not.
    const tiny = h.sim.admin.seedSubnet(h.vpcId, '10.0.8.0/28', 'us-east-1a').subnetId;
    h.configure({ minLeases: 16, podSubnetIds: [tiny] });
    const id = h.launchInstance('m5.large');
    await h.drive(launchEventBody(id));

    const node = await h.store.getNode(h.instanceArnOf(id));
    expect(node?.phase).toBe('FAILED');
    expect(node?.failureReason).toMatch(/^subnets-exhausted: /);
    expect(h.autoScaling.resultFor(id)).toEqual(['ABANDON']);
    expect(await h.ec2.describeNetworkInterfaces({ tags: { 'vpc-lease:instance-id': id } })).toHaveLength(0);
    await expectClean(h);
  });

  it('abandons with reason subnets-exhausted when EC2 refuses every create at run time', async () => {
    await start();
    h.sim.admin.failNext({ action: 'CreateNetworkInterface', code: 'InsufficientFreeAddressesInSubnet', count: 10 });
    const id = h.launchInstance('m5.large');
    await h.drive(launchEventBody(id));

    const node = await h.store.getNode(h.instanceArnOf(id));
    expect(node?.phase).toBe('FAILED');
    expect(node?.failureReason).toMatch(/^subnets-exhausted: every candidate subnet/);
    expect(h.autoScaling.resultFor(id)).toEqual(['ABANDON']);
    await expectClean(h);
  });

  it('abandons with reason limits when EC2 refuses the attachment for the instance limit', async () => {
    await start();
    h.sim.admin.failNext({ action: 'AttachNetworkInterface', code: 'AttachmentLimitExceeded', count: 5 });
    const id = h.launchInstance('m5.large');
    await h.drive(launchEventBody(id));

    const node = await h.store.getNode(h.instanceArnOf(id));
    expect(node?.phase).toBe('FAILED');
    expect(node?.failureReason).toMatch(/^limits: AttachNetworkInterface AttachmentLimitExceeded/);
    expect(h.autoScaling.resultFor(id)).toEqual(['ABANDON']);
    // Counted for the cluster's abandoned-launch alarm, with the reason's kind.
    expect(h.metrics.total('LaunchAbandoned', { ClusterName: h.config.clusterName, Reason: 'limits' })).toBe(1);
    // The created, never attached ENIs were deleted rather than leaked.
    expect(await h.ec2.describeNetworkInterfaces({ tags: { 'vpc-lease:instance-id': id } })).toHaveLength(0);
    await expectClean(h);
  });

  describe("errors that are not the node's fault", () => {
    // A budget of 3 s of waits: charged waits would ABANDON after three failures; these six must not.
    const budget = { maxWaitS: 3, attachingDelayS: 1, backoffBaseS: 1, backoffMaxS: 1 };

    it.each([
      ['CreateNetworkInterface', 'UnauthorizedOperation'],
      ['CreateNetworkInterface', 'NetworkInterfaceLimitExceeded'],
      ['AttachNetworkInterface', 'SomeCodeThisVersionDoesNotKnow'],
    ])('retries %s %s with back-off and heartbeats, shows the cause, never ABANDONs', async (action, code) => {
      await start({ retry: budget });
      h.sim.admin.failNext({ action, code, count: 6 });
      const id = h.launchInstance('m5.large');
      const body = launchEventBody(id);

      await createLifecycleRecordHandler(h.deps())(body);
      const waiting = await h.store.getNode(h.instanceArnOf(id));
      expect(waiting?.phase).toBe('PROVISIONING');
      expect(waiting?.failureReason).toMatch(new RegExp(`^account: EC2 ${action} ${code} \\(retrying`));
      const marker = JSON.parse(h.requeue.queued[0]!.body).vpcLease;
      expect(marker).toMatchObject({ attempt: 1, waitedS: 0 });
      expect(h.requeue.queued[0]!.delayS).toBeGreaterThanOrEqual(1);

      await h.drive(h.requeue.queued[0]!.body);
      const node = await h.store.getNode(h.instanceArnOf(id));
      expect(node?.phase).toBe('READY');
      expect(node?.failureReason).toBeUndefined();
      expect(h.autoScaling.resultFor(id)).toEqual(['CONTINUE']);
      // One heartbeat per wait: three account waits (two ENIs fail per attempt) at least.
      expect(h.autoScaling.heartbeats.length).toBeGreaterThanOrEqual(3);
      // What the alarm watches (infra/construct/launch-template.ts): EC2 errors of kind `account`.
      expect(h.metrics.total('Ec2Errors', { Action: action, Kind: 'account' })).toBe(6);
      await expectClean(h);
    });

    it('drops the event once the lifecycle action is gone, instead of retrying for ever', async () => {
      await start({ retry: budget });
      h.sim.admin.failNext({ action: 'CreateNetworkInterface', code: 'UnauthorizedOperation', count: 50 });
      const id = h.launchInstance('m5.large');
      const body = launchEventBody(id);
      await createLifecycleRecordHandler(h.deps())(body);
      const ref = JSON.parse(body).detail;
      // The hook timed out meanwhile (Auto Scaling applied its default result).
      await h.autoScaling.completeLifecycleAction(
        {
          autoScalingGroupName: ref.AutoScalingGroupName,
          hookName: ref.LifecycleHookName,
          token: ref.LifecycleActionToken,
          instanceId: id,
        },
        'ABANDON',
      );
      const before = h.requeue.queued.length;
      await createLifecycleRecordHandler(h.deps())(h.requeue.queued[0]!.body);
      expect(h.requeue.queued).toHaveLength(before);
      expect(h.metrics.total('LaunchAbandoned', {})).toBe(0);
    });

    it('still ABANDONs, with the code recorded, when the request can never succeed (negative control)', async () => {
      await start({ retry: budget });
      h.sim.admin.failNext({ action: 'CreateNetworkInterface', code: 'InvalidParameterValue', count: 6 });
      const id = h.launchInstance('m5.large');
      await h.drive(launchEventBody(id));

      const node = await h.store.getNode(h.instanceArnOf(id));
      expect(node?.phase).toBe('FAILED');
      expect(node?.failureReason).toMatch(/^fatal: CreateNetworkInterface InvalidParameterValue/);
      expect(h.autoScaling.resultFor(id)).toEqual(['ABANDON']);
      // Both ENIs' creates were refused in the same step.
      expect(h.metrics.total('Ec2Errors', { Action: 'CreateNetworkInterface', Kind: 'fatal' })).toBe(2);
      await expectClean(h);
    });
  });

  it('abandons with the EC2 code as reason when a configured pod subnet does not exist', async () => {
    await start({ config: { podSubnetIds: ['subnet-0123456789abcdef0'] } });
    const id = h.launchInstance('m5.large');
    await h.drive(launchEventBody(id));

    const node = await h.store.getNode(h.instanceArnOf(id));
    expect(node?.phase).toBe('FAILED');
    expect(node?.failureReason).toMatch(/^fatal: DescribeSubnets InvalidSubnetID.NotFound/);
    expect(h.autoScaling.resultFor(id)).toEqual(['ABANDON']);
    await expectClean(h);
  });

  it('abandons with reason config for prefix delegation on a non-Nitro type', async () => {
    await start({ config: { prefixDelegation: true, minLeases: 1, warmLowLeases: 1, warmHighLeases: 1 } });
    const id = h.launchInstance('t2.medium');
    await h.drive(launchEventBody(id));

    const node = await h.store.getNode(h.instanceArnOf(id));
    expect(node?.phase).toBe('FAILED');
    expect(node?.failureReason).toMatch(/^config: prefix delegation needs a Nitro instance/);
    expect(h.autoScaling.resultFor(id)).toEqual(['ABANDON']);
    await expectClean(h);
  });
});
