import { EC2Client, RunInstancesCommand, TerminateInstancesCommand } from '@aws-sdk/client-ec2';
import { afterEach, describe, expect, it } from 'vitest';
import { formatViolations } from '../../shared/invariants/checker.js';
import { STATE_CHANGE_DETAIL_TYPE } from '../../shared/lifecycle/events.js';
import { eventually, LifecycleCloud } from './support/cloud.js';

describe('Launch without a hook on the local cloud (RunInstances → EC2 state change → EventBridge → SQS → handler)', () => {
  let c: LifecycleCloud;
  let ec2: EC2Client;
  afterEach(async () => {
    ec2?.destroy();
    await c?.close();
  });

  const runInstances = async (count: number, tags: Record<string, string>): Promise<string[]> => {
    const out = await ec2.send(
      new RunInstancesCommand({
        InstanceType: 'm5.large',
        MinCount: count,
        MaxCount: count,
        SubnetId: c.subnetIds[0],
        TagSpecifications: [
          { ResourceType: 'instance', Tags: Object.entries(tags).map(([Key, Value]) => ({ Key, Value })) },
        ],
      }),
    );
    return (out.Instances ?? []).map((i) => i.InstanceId!);
  };

  it('brings cluster-tagged instances to READY, ignores an untagged one, and cleans up on termination', async () => {
    c = await LifecycleCloud.start({ hookless: true });
    ec2 = new EC2Client({
      region: c.cloud.region,
      endpoint: c.cloud.endpoints.ec2,
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
    const nodes = await runInstances(3, { 'kubernetes.io/cluster/local': 'owned', 'karpenter.sh/nodepool': 'default' });
    const [stranger] = await runInstances(1, { Name: 'not-a-node' });

    for (const id of nodes)
      await eventually(`node ${id} READY`, async () => (await c.deps.store.getNode(c.arnOf(id)))?.phase === 'READY');
    for (const id of nodes) expect(await c.deps.store.listLeases(c.arnOf(id))).toHaveLength(16);
    // EC2 emitted both states for every instance, the stranger's too; both reached the handler.
    const states = (id: string) =>
      c.cloud.bus
        .events()
        .filter((e) => e['detail-type'] === STATE_CHANGE_DETAIL_TYPE)
        .map((e) => e.detail as { 'instance-id': string; state: string })
        .filter((d) => d['instance-id'] === id)
        .map((d) => d.state);
    for (const id of [...nodes, stranger!]) expect(states(id)).toEqual(['pending', 'running']);
    await eventually('the stranger’s events handled', () => (c.deliveries.get(stranger!) ?? 0) >= 2);
    expect(await c.deps.store.getNode(c.arnOf(stranger!))).toBeUndefined();
    expect(c.cloud.ec2.api.instanceInterfaces(stranger!)).toHaveLength(1);
    expect(formatViolations(await c.check())).toBe('');

    await ec2.send(new TerminateInstancesCommand({ InstanceIds: [...nodes, stranger!] }));
    for (const id of nodes)
      await eventually(`node ${id} GONE`, async () => (await c.deps.store.getNode(c.arnOf(id)))?.phase === 'GONE');
    const left = await c.deps.ec2.describeNetworkInterfaces({ tags: { 'vpc-lease:cluster': 'local' } });
    expect(left).toHaveLength(0);
    await eventually('queue drained', () => {
      const q = c.queue.counts();
      return q.visible + q.inFlight + q.delayed === 0;
    });
    expect(c.dlq.counts().visible + c.dlq.counts().inFlight).toBe(0);
    expect(formatViolations(await c.check())).toBe('');
  }, 90_000);

  it('routes no state change but terminated without the hookless rule (negative control)', async () => {
    c = await LifecycleCloud.start();
    ec2 = new EC2Client({
      region: c.cloud.region,
      endpoint: c.cloud.endpoints.ec2,
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
    const matchedBefore = c.cloud.bus.getStats().matched;
    const [id] = await runInstances(1, { 'kubernetes.io/cluster/local': 'owned' });
    // The bus matches rules and enqueues synchronously as each event is put: once both state changes are on it,
    // no rule matched them and nothing was queued, nothing can arrive later (no fixed wait needed).
    await eventually('both state changes on the bus', () => {
      const mine = c.cloud.bus
        .events()
        .filter((e) => e['detail-type'] === STATE_CHANGE_DETAIL_TYPE)
        .filter((e) => (e.detail as { 'instance-id': string })['instance-id'] === id);
      return mine.length === 2;
    });
    expect(c.cloud.bus.getStats().matched).toBe(matchedBefore);
    expect(c.queue.counts()).toEqual({ visible: 0, inFlight: 0, delayed: 0 });
    expect(c.deliveries.get(id!) ?? 0).toBe(0);
    expect(await c.deps.store.getNode(c.arnOf(id!))).toBeUndefined();
  });
});
