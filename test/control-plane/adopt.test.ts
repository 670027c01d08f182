import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterEach, describe, expect, it } from 'vitest';
import type { LaunchInterfaceSpec } from '../../local-cloud/ports.js';
import { SdkDynamoApi } from '../../shared/dynamo/sdk-client.js';
import { MUTATING_ACTIONS } from '../../shared/ec2/port.js';
import { BatchAttachedEnis, withPrefetchedInstance } from '../../shared/ec2/prefetched-ec2.js';
import { launchTemplateEniTags } from '../../shared/ec2/tags.js';
import { formatViolations } from '../../shared/invariants/checker.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import { createLifecycleBatchHandler } from '../../shared/lifecycle/batch-handler.js';
import { createLifecycleRecordHandler } from '../../shared/lifecycle/record-handler.js';
import { planTemplateEnis } from '../../shared/planner/template-plan.js';
import { CountingApi } from '../lease-store/counting-api.js';
import { launchEventBody, sqsRecord } from './support/events.js';
import { CREDENTIALS, Harness, type HarnessOptions, REGION } from './support/harness.js';
import { limitsOf } from './support/limits.js';

/** The pod ENIs the construct would put in the node group's launch template, for this harness's config. */
function templateEnis(h: Harness, instanceType: string): LaunchInterfaceSpec[] {
  const { prefixDelegation, minLeases, warmHighLeases, maxPods } = h.config;
  return planTemplateEnis({ limits: limitsOf(instanceType), prefixDelegation, minLeases, warmHighLeases, maxPods }).map(
    (e) => ({
      deviceIndex: e.deviceIndex,
      networkCardIndex: e.networkCardIndex,
      ...(e.ipCount > 0 ? { secondaryPrivateIpAddressCount: e.ipCount } : {}),
      ...(e.prefixCount > 0 ? { ipv4PrefixCount: e.prefixCount } : {}),
      deleteOnTermination: true,
    }),
  );
}

function launchFromTemplate(
  h: Harness,
  instanceType: string,
  networkInterfaces: readonly LaunchInterfaceSpec[],
  tags: Record<string, string> = launchTemplateEniTags(h.config.clusterName),
): string {
  return h.sim.api.launchInstance({
    instanceType,
    subnetId: h.subnetId,
    networkInterfaces,
    networkInterfaceTags: tags,
  }).instanceId;
}

/** What a container's first adoption describes (a batch of them too): limits and subnet CIDRs are then cached. */
const ONE_DESCRIBE_EACH = {
  DescribeInstances: 1,
  DescribeInstanceTypes: 1,
  DescribeNetworkInterfaces: 1,
  DescribeSubnets: 1,
};

/** EC2 calls that reached the simulator, by action (its own request log, not the adapter's metrics). */
function simCalls(h: Harness): { mutating: Record<string, number>; describe: Record<string, number> } {
  const counts = h.sim.admin.counts();
  const pick = (keep: (action: string) => boolean) =>
    Object.fromEntries(
      Object.entries(counts)
        .filter(([a]) => keep(a))
        .map(([a, n]) => [a, n.calls]),
    );
  return { mutating: pick((a) => MUTATING_ACTIONS.has(a)), describe: pick((a) => a.startsWith('Describe')) };
}

describe('Function: adoptTemplateEnis (launch-template adoption, EC2 simulator + dynalite)', () => {
  let h: Harness;
  const start = async (options?: HarnessOptions): Promise<void> => {
    h = await Harness.start({ ec2: { timeScale: 0.001 }, ...options });
  };
  afterEach(async () => {
    await h?.close();
  });

  it('adopts the template ENIs with zero mutating EC2 calls and leases every secondary address', async () => {
    await start();
    const id = launchFromTemplate(h, 'm5.large', templateEnis(h, 'm5.large'));
    h.sim.admin.resetCounts();

    // One container (one set of deps) for both launches, as a Lambda container would be.
    const handle = createLifecycleRecordHandler(h.deps());
    await handle(launchEventBody(id));
    expect(h.requeue.queued).toEqual([]);

    const node = await h.store.getNode(h.instanceArnOf(id));
    const leases = await h.store.listLeases(h.instanceArnOf(id));
    const ifaces = h.sim.api.instanceInterfaces(id).filter((i) => i.deviceIndex > 0);
    expect(node?.phase).toBe('READY');
    expect(node?.enis.map((e) => [e.deviceIndex, e.eniId, e.step])).toEqual(
      ifaces.map((i) => [i.deviceIndex, i.eniId, 'LEASED']),
    );
    const expected = ifaces.flatMap((i) => i.privateIpAddresses.slice(1).map((ip) => `${ip}@${i.eniId}/${i.mac}`));
    expect(expected).toHaveLength(16);
    expect(leases.map((l) => `${l.ip}@${l.eniId}/${l.mac}`).sort()).toEqual(expected.sort());
    expect(leases.every((l) => l.state === 'FREE' && l.gateway === '10.0.0.1' && l.subnetCidr === '10.0.0.0/22')).toBe(
      true,
    );
    expect(h.autoScaling.resultFor(id)).toEqual(['CONTINUE']);
    expect(simCalls(h)).toEqual({ mutating: {}, describe: ONE_DESCRIBE_EACH });
    expect(formatViolations(await h.check())).toBe('');

    // A second node in the same container: limits and the subnet's CIDR are cached, two Describes remain.
    const second = launchFromTemplate(h, 'm5.large', templateEnis(h, 'm5.large'));
    h.sim.admin.resetCounts();
    await handle(launchEventBody(second));
    expect((await h.store.getNode(h.instanceArnOf(second)))?.phase).toBe('READY');
    expect(simCalls(h)).toEqual({ mutating: {}, describe: { DescribeInstances: 1, DescribeNetworkInterfaces: 1 } });
  });

  it('writes the node item three times and each lease once per adopted node: no PENDING item, READY with the leases, then the hook time', async () => {
    await start();
    const id = launchFromTemplate(h, 'm5.large', templateEnis(h, 'm5.large'));
    // The lease store over a DynamoDB client that counts each request by operation.
    const api = new CountingApi(
      new SdkDynamoApi(new DynamoDBClient({ region: REGION, endpoint: h.dynamo.endpoint, credentials: CREDENTIALS })),
    );
    const store = new DynamoLeaseStore({ api, tableName: h.config.tableName });

    await createLifecycleRecordHandler(h.deps(undefined, { store }))(launchEventBody(id));

    const node = await h.store.getNode(h.instanceArnOf(id));
    expect(node?.phase).toBe('READY');
    expect(node?.enis.every((e) => e.step === 'LEASED')).toBe(true);
    expect(await h.store.listLeases(h.instanceArnOf(id))).toHaveLength(16);
    // One read (is there a node item?), the item created PROVISIONING, 16 conditional lease puts, READY; after
    // the hook is completed, one read and one write record when (hook-completion.ts).
    expect(api.calls.length).toBe(1 + 1 + 16 + 1 + 2);
    expect([api.count('GetItem'), api.count('PutItem')]).toEqual([1 + 1, 1 + 16 + 1 + 1]);
    expect(h.autoScaling.resultFor(id)).toEqual(['CONTINUE']);
  });

  it("adopts once when a duplicate event races the first: the loser of the item's creation waits, then finds it READY", async () => {
    await start();
    const id = launchFromTemplate(h, 'm5.large', templateEnis(h, 'm5.large'));
    const body = launchEventBody(id);

    // Both read "no node item", both describe the ENIs, both try to create the item: one write wins.
    await Promise.all([createLifecycleRecordHandler(h.deps())(body), createLifecycleRecordHandler(h.deps())(body)]);
    expect(h.requeue.queued.map((q) => JSON.parse(q.body).vpcLease.reason)).toEqual([
      'node item changed by a concurrent invocation',
    ]);
    for (const requeued of [...h.requeue.queued]) await h.drive(requeued.body);

    const node = await h.store.getNode(h.instanceArnOf(id));
    expect(node?.phase).toBe('READY');
    // Created PROVISIONING, READY, then the hook's completion time: nobody wrote over the winner.
    expect(node?.version).toBe(3);
    expect(node?.hookCompletedAtMs).toBeTypeOf('number');
    expect(await h.store.listLeases(h.instanceArnOf(id))).toHaveLength(16);
    expect(h.autoScaling.resultFor(id)).toEqual(['CONTINUE']);
    expect(formatViolations(await h.check())).toBe('');
  });

  it("keeps the subnet CIDR for the container's life through the batch handler, which wraps EC2 per record", async () => {
    await start();
    const [first, second] = [0, 1].map(() => launchFromTemplate(h, 'm5.large', templateEnis(h, 'm5.large')));
    h.sim.admin.resetCounts();

    // Two invocations of one container: each record sees EC2 through its own prefetching view.
    const handle = createLifecycleBatchHandler(h.deps());
    await handle({ Records: [sqsRecord('m1', launchEventBody(first!))] });
    await handle({ Records: [sqsRecord('m2', launchEventBody(second!))] });

    for (const id of [first!, second!]) expect(h.autoScaling.resultFor(id)).toEqual(['CONTINUE']);
    // Per node: one DescribeInstances (the batch's) and one DescribeNetworkInterfaces; the subnet once.
    expect(simCalls(h).describe).toEqual({
      DescribeInstances: 2,
      DescribeInstanceTypes: 1,
      DescribeNetworkInterfaces: 2,
      DescribeSubnets: 1,
    });
  });

  it('adopts /28 prefixes in prefix-delegation mode, one lease per address up to the cap', async () => {
    await start({ config: { prefixDelegation: true } });
    const enis = templateEnis(h, 'm5.large');
    expect(enis).toEqual([expect.objectContaining({ deviceIndex: 1, ipv4PrefixCount: 1 })]);
    const id = launchFromTemplate(h, 'm5.large', enis);
    h.sim.admin.resetCounts();
    await h.drive(launchEventBody(id));
    const leases = await h.store.listLeases(h.instanceArnOf(id));
    const [prefix] = h.sim.api.instanceInterfaces(id).find((i) => i.deviceIndex === 1)!.ipv4Prefixes;
    expect(leases).toHaveLength(16);
    expect(leases.every((l) => l.prefix === prefix)).toBe(true);
    expect(simCalls(h).mutating).toEqual({});
    expect(formatViolations(await h.check())).toBe('');
  });

  it('ABANDONs with config: when a template ENI would outlive the instance (DeleteOnTermination off)', async () => {
    await start();
    const enis = templateEnis(h, 'm5.large').map((e, i) => (i === 0 ? { ...e, deleteOnTermination: false } : e));
    const id = launchFromTemplate(h, 'm5.large', enis);
    h.sim.admin.resetCounts();
    await h.drive(launchEventBody(id));
    const node = await h.store.getNode(h.instanceArnOf(id));
    expect(node?.phase).toBe('FAILED');
    expect(node?.failureReason).toMatch(
      /^config: launch-template pod ENIs not adopted: eni-\w+ \(device 1\): DeleteOnTermination is off/,
    );
    // Refused before any item existed, yet the FAILED item says what the instance was.
    expect([node?.instanceType, node?.availabilityZone]).toEqual(['m5.large', 'us-east-1a']);
    expect(h.autoScaling.resultFor(id)).toEqual(['ABANDON']);
    expect(await h.store.listLeases(h.instanceArnOf(id))).toEqual([]);
    expect(simCalls(h).mutating).toEqual({});
  });

  it('ABANDONs with config: when the template ENIs hold prefixes but prefix delegation is off', async () => {
    await start();
    const id = launchFromTemplate(h, 'm5.large', [{ deviceIndex: 1, ipv4PrefixCount: 1, deleteOnTermination: true }]);
    await h.drive(launchEventBody(id));
    const node = await h.store.getNode(h.instanceArnOf(id));
    expect(node?.failureReason).toMatch(/prefixes while prefix delegation is off/);
    expect(h.autoScaling.resultFor(id)).toEqual(['ABANDON']);
  });

  it('ABANDONs with config: when the template ENIs carry fewer addresses than minLeases', async () => {
    await start();
    const id = launchFromTemplate(h, 'm5.large', [
      { deviceIndex: 1, secondaryPrivateIpAddressCount: 3, deleteOnTermination: true },
    ]);
    await h.drive(launchEventBody(id));
    const node = await h.store.getNode(h.instanceArnOf(id));
    expect(node?.failureReason).toBe("config: the launch template's pod ENIs carry 3 addresses, below minLeases 8");
    expect(h.autoScaling.resultFor(id)).toEqual(['ABANDON']);
  });

  it('waits, creating nothing, while DescribeNetworkInterfaces lags behind DescribeInstances', async () => {
    await start();
    const id = launchFromTemplate(h, 'm5.large', templateEnis(h, 'm5.large'));
    const base = h.deps();
    // Eventual consistency between the two APIs: the pod ENIs are not in the filtered Describe yet.
    const lagging = {
      ...base,
      ec2: Object.assign(Object.create(base.ec2), {
        describeNetworkInterfaces: async (q: Parameters<typeof base.ec2.describeNetworkInterfaces>[0]) =>
          (await base.ec2.describeNetworkInterfaces(q)).filter((e) => e.attachment?.deviceIndex === 0),
      }),
    };
    h.sim.admin.resetCounts();
    await createLifecycleRecordHandler(lagging)(launchEventBody(id));
    expect(h.requeue.queued).toHaveLength(1);
    expect(simCalls(h).mutating).toEqual({});
    // Nothing written either: the node item is first written once the ENIs are adopted.
    expect(await h.store.getNode(h.instanceArnOf(id))).toBeUndefined();
    await h.drive(h.requeue.queued[0]!.body);
    expect((await h.store.getNode(h.instanceArnOf(id)))?.phase).toBe('READY');
    expect(simCalls(h).mutating).toEqual({});
  });

  it('leaves ENIs that are not tagged for the cluster alone and creates its pod ENIs around them', async () => {
    await start();
    const id = launchFromTemplate(
      h,
      'm5.large',
      [{ deviceIndex: 1, secondaryPrivateIpAddressCount: 2, deleteOnTermination: true }],
      { 'vpc-lease:cluster': 'someone-else' },
    );
    const foreign = h.sim.api.instanceInterfaces(id).find((i) => i.deviceIndex === 1)!;
    h.sim.admin.resetCounts();
    await h.drive(launchEventBody(id));
    const node = await h.store.getNode(h.instanceArnOf(id));
    expect(node?.phase).toBe('READY');
    expect(node?.enis.map((e) => e.deviceIndex)).toEqual([2]);
    const leases = await h.store.listLeases(h.instanceArnOf(id));
    expect(leases.some((l) => l.eniId === foreign.eniId)).toBe(false);
    expect(simCalls(h).mutating['CreateNetworkInterface']).toBe(1);
  });

  describe('a batch of adoptions (batch handler: one DescribeNetworkInterfaces for the batch)', () => {
    const batchOf = (ids: readonly string[], bodyOf = (id: string) => launchEventBody(id)) => ({
      Records: ids.map((id, n) => sqsRecord(`m${n}`, bodyOf(id))),
    });
    /** Each node's recorded ENIs are exactly the template ENIs EC2 attached to that instance (invariant 8). */
    const expectOwnEnis = async (ids: readonly string[]) => {
      for (const id of ids) {
        const node = await h.store.getNode(h.instanceArnOf(id));
        expect(node?.phase).toBe('READY');
        const attached = h.sim.api.instanceInterfaces(id).filter((i) => i.deviceIndex > 0);
        expect(node?.enis.map((e) => e.eniId)).toEqual(attached.map((i) => i.eniId));
        expect(await h.store.listLeases(h.instanceArnOf(id))).toHaveLength(16);
        // A duplicate's repeated completion is CONTINUE again (Auto Scaling answers it as gone), never ABANDON.
        expect(new Set(h.autoScaling.resultFor(id))).toEqual(new Set(['CONTINUE']));
      }
    };

    it('adopts ten launches with one DescribeInstances and one DescribeNetworkInterfaces, each node its own ENIs', async () => {
      await start();
      const ids = Array.from({ length: 10 }, () => launchFromTemplate(h, 'm5.large', templateEnis(h, 'm5.large')));
      h.sim.admin.resetCounts();

      const out = await createLifecycleBatchHandler(h.deps())(batchOf(ids));

      expect(out.batchItemFailures).toEqual([]);
      expect(h.requeue.queued).toEqual([]);
      await expectOwnEnis(ids);
      // The same Describes as one launch alone.
      expect(simCalls(h)).toEqual({ mutating: {}, describe: ONE_DESCRIBE_EACH });
      expect(formatViolations(await h.check())).toBe('');
    });

    it('adopts once when the same launch comes twice in one batch and again late (invariant 5)', async () => {
      await start();
      const [a, b] = [0, 1].map(() => launchFromTemplate(h, 'm5.large', templateEnis(h, 'm5.large')));
      const handle = createLifecycleBatchHandler(h.deps());

      await handle(batchOf([a!, b!, a!]));
      for (const requeued of [...h.requeue.queued]) await h.drive(requeued.body);
      // A late redelivery of the whole batch finds both READY and changes nothing.
      await handle(batchOf([a!, b!]));

      await expectOwnEnis([a!, b!]);
      // Created PROVISIONING, READY, then the hook's completion time: the duplicates wrote nothing over them.
      for (const id of [a!, b!]) expect((await h.store.getNode(h.instanceArnOf(id)))?.version).toBe(3);
      expect(simCalls(h).mutating).toEqual({});
      expect(formatViolations(await h.check())).toBe('');
    });

    it("falls back to a DescribeNetworkInterfaces per launch when the batch's call fails", async () => {
      await start();
      const ids = [0, 1, 2].map(() => launchFromTemplate(h, 'm5.large', templateEnis(h, 'm5.large')));
      h.sim.admin.resetCounts();
      // Not retryable: the adapter gives up on the first answer, so exactly the batch's call fails.
      h.sim.admin.failNext({ action: 'DescribeNetworkInterfaces', code: 'UnauthorizedOperation', count: 1 });

      await createLifecycleBatchHandler(h.deps())(batchOf(ids));

      await expectOwnEnis(ids);
      expect(h.sim.admin.counts()['DescribeNetworkInterfaces']).toMatchObject({ calls: 1 + 3, faulted: 1 });
    });

    it("leaves create-and-attach launches out of the batch's call: they have no ENI to adopt", async () => {
      await start();
      const plain = h.launchInstance('m5.large');
      const adopted = launchFromTemplate(h, 'm5.large', templateEnis(h, 'm5.large'));
      h.sim.admin.resetCounts();
      const seen: (readonly string[] | undefined)[] = [];
      const base = h.deps();
      const watching = {
        ...base,
        ec2: Object.assign(Object.create(base.ec2), {
          describeNetworkInterfaces: (q: Parameters<typeof base.ec2.describeNetworkInterfaces>[0]) => {
            if (q.attachedToAny) seen.push(q.attachedToAny);
            return base.ec2.describeNetworkInterfaces(q);
          },
        }),
      };

      await createLifecycleBatchHandler(watching)(batchOf([plain, adopted]));

      expect(seen).toEqual([[adopted]]);
      expect(h.autoScaling.resultFor(adopted)).toEqual(['CONTINUE']);
      expect((await h.store.getNode(h.instanceArnOf(plain)))?.phase).toBe('READY');
      expect(simCalls(h).mutating['CreateNetworkInterface']).toBe(2);
    });

    it("answers a record from the batch's call only until that record changes something in EC2", async () => {
      await start();
      const [a, b] = [0, 1].map(() => launchFromTemplate(h, 'm5.large', templateEnis(h, 'm5.large')));
      const ec2 = h.deps().ec2;
      const instances = await ec2.describeInstances([a!, b!]);
      const attached = BatchAttachedEnis.of(ec2, instances, h.deps().logger);
      const viewA = withPrefetchedInstance(ec2, a!, instances.get(a!), attached);
      const viewB = withPrefetchedInstance(ec2, b!, instances.get(b!), attached);
      // A's describe fetches the batch's answer, B's attachment included.
      expect((await viewA.describeNetworkInterfaces({ attachedTo: a! })).length).toBeGreaterThan(0);
      const eniB = instances.get(b!)!.interfaces.find((i) => (i.attachment?.deviceIndex ?? 0) >= 1)!;
      h.sim.admin.resetCounts();

      // B detaches one of its ENIs, then looks: the batch's answer, taken before, would still show it attached.
      await viewB.detachNetworkInterface(eniB.attachment!.attachmentId);
      const seen = await viewB.describeNetworkInterfaces({ attachedTo: b! });

      expect(h.sim.admin.counts()['DescribeNetworkInterfaces']?.calls).toBe(1);
      expect(seen.find((e) => e.eniId === eniB.eniId)?.attachment?.status).not.toBe('attached');
    });
  });
});
