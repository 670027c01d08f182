import { afterEach, describe, expect, it } from 'vitest';
import { formatViolations } from '../../shared/invariants/checker.js';
import { eventually, LifecycleCloud } from './support/cloud.js';

describe('Lifecycle Lambda on the local cloud (Auto Scaling → EventBridge → SQS → handler)', () => {
  let c: LifecycleCloud;
  afterEach(async () => {
    await c?.close();
  });

  it('launches m5.large, c5.4xlarge and t3.medium nodes to READY and InService, then drains them to nothing', async () => {
    c = await LifecycleCloud.start();
    const groups = { m5: ['m5.large', 16], c5: ['c5.4xlarge', 16], t3: ['t3.medium', 10] } as const;
    for (const [name, [type]] of Object.entries(groups)) c.createGroup(name, type, 2);

    for (const [name, [, leases]] of Object.entries(groups)) {
      const inService = await eventually(`${name} InService`, () => {
        const instances = c.groupInstances(name);
        return instances.length === 2 && instances.every((i) => i.lifecycleState === 'InService') && instances;
      });
      for (const { instanceId } of inService) {
        const node = await c.deps.store.getNode(c.arnOf(instanceId));
        expect(node?.phase).toBe('READY');
        expect(await c.deps.store.listLeases(c.arnOf(instanceId))).toHaveLength(leases);
      }
    }
    expect(formatViolations(await c.check())).toBe('');
    expect(c.dlq.counts().visible + c.dlq.counts().inFlight).toBe(0);

    const ids = Object.keys(groups).flatMap((g) => c.groupInstances(g).map((i) => i.instanceId));
    for (const name of Object.keys(groups)) c.cloud.autoScaling.simulator.setDesiredCapacity(name, 0);
    await eventually('all instances terminated', () =>
      ids.every((id) => c.cloud.ec2.api.getInstance(id)?.state === 'terminated'),
    );
    for (const id of ids)
      await eventually(`node ${id} GONE`, async () => (await c.deps.store.getNode(c.arnOf(id)))?.phase === 'GONE');
    for (const id of ids) expect(await c.deps.store.listLeases(c.arnOf(id))).toHaveLength(0);
    const left = await c.deps.ec2.describeNetworkInterfaces({ tags: { 'vpc-lease:cluster': 'local' } });
    expect(left).toHaveLength(0);
    expect(formatViolations(await c.check())).toBe('');
  });
});

describe('Lifecycle Lambda on the local cloud under faults', () => {
  let c: LifecycleCloud;
  afterEach(async () => {
    await c?.close();
  });

  const allInService = (name: string, n: number) => () => {
    const instances = c.groupInstances(name).filter((i) => i.lifecycleState === 'InService');
    return instances.length === n && instances;
  };

  it('gives prefix-mode nodes their /28 leases in the pod subnet chosen by tags', async () => {
    c = await LifecycleCloud.start({ config: { prefixDelegation: true, podSubnetTags: { 'vpc-lease/pods': 'true' } } });
    const pods = c.cloud.ec2.admin.seedSubnet(c.cloud.network!.vpcId, '10.0.64.0/20', 'us-east-1a');
    pods.tags.set('vpc-lease/pods', 'true');
    c.createGroup('pd', 'm5.large', 2);
    const instances = await eventually('prefix nodes InService', allInService('pd', 2));
    for (const { instanceId } of instances) {
      const leases = await c.deps.store.listLeases(c.arnOf(instanceId));
      expect(leases).toHaveLength(16);
      expect(leases.every((l) => l.subnetId === pods.subnetId && l.prefix !== undefined)).toBe(true);
      expect(new Set(leases.map((l) => l.prefix)).size).toBe(1);
    }
    expect(formatViolations(await c.check())).toBe('');
  });

  it('creates no extra ENI when SQS delivers events twice', async () => {
    c = await LifecycleCloud.start({ sqs: { duplicateRate: 0.5 } });
    c.createGroup('dup', 'm5.large', 4);
    const instances = await eventually('dup InService', allInService('dup', 4));
    // Half the receives leave a duplicate behind. On a loaded machine duplicates overlap and the loser of the
    // node item's conditional write may fail its record, to be redelivered: legitimate at-least-once traffic,
    // so no failure count is asserted — only that messages were seen twice and none ended in the DLQ.
    expect([...c.messageDeliveries.values()].filter((n) => n > 1).length).toBeGreaterThan(0);
    expect(c.dlq.counts().visible).toBe(0);
    for (const { instanceId } of instances) {
      const enis = await c.deps.ec2.describeNetworkInterfaces({ tags: { 'vpc-lease:instance-id': instanceId } });
      expect(enis).toHaveLength(2);
      expect(await c.deps.store.listLeases(c.arnOf(instanceId))).toHaveLength(16);
    }
    expect(formatViolations(await c.check())).toBe('');
  });

  it('recovers from a crash after each EC2 call of a launch through SQS redelivery', async () => {
    // One instance per crash point, all launched at once; each crashes on its first delivery only. The first
    // invocation of an m5.large launch makes 10 EC2 calls (3 describes, 2 × create/attach/modify, 1 describe).
    const points = 10;
    let next = 0;
    const assigned = new Map<string, number>();
    c = await LifecycleCloud.start({
      crashFor: (id) => {
        if (!assigned.has(id)) {
          next += 1;
          assigned.set(id, next);
        }
        return assigned.get(id);
      },
    });
    c.createGroup('crash', 'm5.large', points);
    const instances = await eventually('crashed launches InService', allInService('crash', points), 60_000);
    expect(c.crashes).toBe(points);
    expect(c.mapping.stats().recordsFailed).toBeGreaterThanOrEqual(points);
    for (const { instanceId } of instances) {
      const where = `crash point ${assigned.get(instanceId)}`;
      const node = await c.deps.store.getNode(c.arnOf(instanceId));
      expect(node?.phase, where).toBe('READY');
      const enis = await c.deps.ec2.describeNetworkInterfaces({ tags: { 'vpc-lease:instance-id': instanceId } });
      expect(enis.map((e) => e.eniId).sort(), where).toEqual(node?.enis.map((e) => e.eniId).sort());
      const leases = await c.deps.store.listLeases(c.arnOf(instanceId));
      expect(leases.map((l) => l.ip).sort(), where).toEqual(enis.flatMap((e) => e.secondaryIps).sort());
    }
    expect(formatViolations(await c.check())).toBe('');
    expect(c.dlq.counts().visible).toBe(0);
  }, 90_000);

  it('brings every node up through a throttling storm without an extra ENI', async () => {
    // Token buckets far below AWS's, plus a seeded 40 % of RequestLimitExceeded answers on every mutating call,
    // and only 2 SDK attempts per call: the storm gets past the SDK's retries, so the executor must persist,
    // re-enqueue with back-off and resume.
    c = await LifecycleCloud.start({ timeScale: 0.05, ec2: { throttling: true }, ec2MaxAttempts: 2 });
    for (const action of ['CreateNetworkInterface', 'AttachNetworkInterface', 'ModifyNetworkInterfaceAttribute']) {
      c.cloud.ec2.admin.setBucket(action, { bucket: 2, refillPerSecond: 0.1 });
      c.cloud.ec2.admin.failNext({ action, code: 'RequestLimitExceeded', probability: 0.4 });
    }
    c.createGroup('storm', 'm5.large', 6);
    // The storm passes once it has pushed work back to the queue a few times (as real storms pass); what it
    // left half-done must then complete.
    const calm = setInterval(() => {
      if ((c.deps.metrics?.total('Requeued', { Flow: 'launch' }) ?? 0) >= 3) c.cloud.ec2.admin.clearFaults();
    }, 50);
    const instances = await eventually('storm InService', allInService('storm', 6), 90_000).finally(() =>
      clearInterval(calm),
    );
    const counts = Object.values(c.cloud.ec2.admin.counts());
    expect(counts.reduce((s, a) => s + a.throttled + a.faulted, 0)).toBeGreaterThan(0);
    expect(c.deps.metrics?.total('Requeued', { Flow: 'launch' })).toBeGreaterThan(0);
    expect(c.deps.metrics?.total('Ec2Errors', { Kind: 'throttling' })).toBeGreaterThan(0);
    const enis = await c.deps.ec2.describeNetworkInterfaces({ tags: { 'vpc-lease:cluster': 'local' } });
    expect(enis).toHaveLength(12);
    for (const { instanceId } of instances) expect(await c.deps.store.listLeases(c.arnOf(instanceId))).toHaveLength(16);
    expect(formatViolations(await c.check())).toBe('');
  }, 120_000);

  it('abandons with a recorded reason when every candidate subnet is exhausted, and cleans up', async () => {
    // A /28 has 11 usable addresses: an m5.large needs 18 (two ENIs) for minLeases 16.
    c = await LifecycleCloud.start({
      config: (cloud) => ({
        podSubnetIds: [cloud.ec2.admin.seedSubnet(cloud.network!.vpcId, '10.0.80.0/28', 'us-east-1a').subnetId],
        minLeases: 16,
      }),
    });
    c.createGroup('full', 'm5.large', 1);
    const failed = await eventually('a FAILED node', async () => {
      for (const node of await c.deps.store.listNodes()) if (node.failureReason) return node;
      return undefined;
    });
    expect(failed.failureReason).toMatch(/^subnets-exhausted: /);
    await eventually(
      'abandoned instance terminated',
      () => c.cloud.ec2.api.getInstance(failed.instanceId)?.state === 'terminated',
    );
    c.cloud.autoScaling.simulator.setDesiredCapacity('full', 0);
    await eventually('group empty', () => c.groupInstances('full').every((i) => i.lifecycleState === 'Terminated'));
    // Replacements keep being abandoned until the group is emptied; whatever phase each reached, nothing is
    // left leased and no FAILED node lacks its reason.
    // Terminations may still be draining (an ENI detaching re-enqueues the event): wait for them to settle.
    const nodes = await eventually('every node settled', async () => {
      const all = await c.deps.store.listNodes();
      return all.every((n) => n.phase === 'FAILED' || n.phase === 'GONE') && all;
    });
    for (const node of nodes) {
      if (node.phase === 'FAILED') expect(node.failureReason).toMatch(/^subnets-exhausted: /);
      expect(await c.deps.store.listLeases(node.instanceArn)).toHaveLength(0);
    }
    expect(formatViolations(await c.check())).toBe('');
  });
});
