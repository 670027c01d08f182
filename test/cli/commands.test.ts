import { CreateNetworkInterfaceCommand, EC2Client, UnassignPrivateIpAddressesCommand } from '@aws-sdk/client-ec2';
import { ReceiveMessageCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { until } from '../../local-cloud/scenario/until.js';
import { runMaxPods } from '../../node/max-pods/command.js';
import { controlPlaneConfigFromEnv } from '../../shared/config/control-plane.js';
import { ENI_TAGS } from '../../shared/ec2/tags.js';
import { GC_MARK_TAG } from '../../shared/reconcile/gc-plan.js';
import { newLeases } from '../lease-store/fixtures.js';
import { CliFixture } from './support.js';

/**
 * Every command of `vpc-lease` against the local cloud (`--local`), on nodes the real lifecycle handler brought
 * up, with leases claimed through the lease store as the CNI claims them.
 */
describe('vpc-lease CLI against the local cloud', () => {
  let f: CliFixture;
  const claimed: string[] = [];
  const credentials = { accessKeyId: 'local', secretAccessKey: 'local' };

  beforeAll(async () => {
    f = await CliFixture.start(2);
    for (const [i, id] of f.instanceIds.entries()) {
      for (let n = 0; n < 3 + i; n += 1) {
        const lease = await f.store.claim(
          f.arnOf(id),
          {
            containerId: `c-${i}-${n}`,
            ifName: 'eth0',
            netns: `/var/run/netns/p${n}`,
            podNamespace: 'ns',
            podName: `web-${n}`,
          },
          Date.now(),
        );
        claimed.push(lease.ip);
      }
    }
  }, 60_000);
  afterAll(async () => {
    await f?.close();
  });

  it('nodes: lists both nodes READY with their leases by state, as a table and as JSON', async () => {
    const table = await f.cli('--local', 'nodes');
    expect(table.code, table.err).toBe(0);
    expect(table.out.split('\n')[0]).toMatch(/^INSTANCE\s+TYPE\s+AZ\s+PHASE/);
    for (const id of f.instanceIds) expect(table.out).toMatch(new RegExp(`${id}\\s+m5\\.large\\s+\\S+\\s+READY`));

    const json = await f.cli('--local', '--json', 'nodes');
    const rows = json.json as { instanceId: string; phase: string; leases: Record<string, number> }[];
    expect(rows.map((r) => r.instanceId).sort()).toEqual(f.instanceIds);
    for (const [i, row] of rows.sort((a, b) => a.instanceId.localeCompare(b.instanceId)).entries()) {
      const leases = await f.store.listLeases(f.arnOf(row.instanceId));
      expect(row.leases['CLAIMED']).toBe(3 + i);
      expect(row.leases['FREE']).toBe(leases.filter((l) => l.state === 'FREE').length);
    }
  });

  it('leases: filters by instance and state, and refuses an unknown state', async () => {
    const id = f.instanceIds[1]!;
    const run = await f.cli('--local', '--json', 'leases', '--instance', id, '--state', 'CLAIMED');
    expect(run.code, run.err).toBe(0);
    const leases = run.json as { ip: string; state: string; instanceId: string; holder: { podName: string } }[];
    expect(leases).toHaveLength(4);
    expect(leases.every((l) => l.state === 'CLAIMED' && l.instanceId === id)).toBe(true);
    expect(leases.map((l) => l.ip).every((ip) => claimed.includes(ip))).toBe(true);

    const all = await f.cli('--local', 'leases', '--state', 'CLAIMED');
    expect(all.out.trim().split('\n')).toHaveLength(1 + claimed.length);
    expect(all.out).toContain('ns/web-0 (eth0)');

    const bad = await f.cli('--local', 'leases', '--state', 'TAKEN');
    expect(bad.code).toBe(2);
    expect(bad.err).toContain('expected one of FREE, CLAIMED, COOLDOWN, RELEASING');
    const badId = await f.cli('--local', 'leases', '--instance', 'node-1');
    expect(badId.code).toBe(2);
    const unknown = await f.cli('--local', 'leases', '--instance', 'i-0123456789abcdef0');
    expect(unknown.code).toBe(1);
    expect(unknown.err).toContain('no node i-0123456789abcdef0');
  });

  it('lease: shows one lease by address, exit 1 when no node has it, 2 for a non-address', async () => {
    const ip = claimed[0]!;
    const run = await f.cli('--local', '--json', 'lease', ip);
    expect(run.code, run.err).toBe(0);
    expect(run.json).toMatchObject({ ip, state: 'CLAIMED', holder: { containerId: 'c-0-0', podName: 'web-0' } });
    const text = await f.cli('--local', 'lease', ip);
    expect(text.out).toMatch(new RegExp(`^ip\\s+${ip.replaceAll('.', '\\.')}$`, 'm'));
    expect(text.out).toMatch(/^state\s+CLAIMED$/m);

    const missing = await f.cli('--local', 'lease', '10.9.9.9');
    expect(missing.code).toBe(1);
    expect(missing.err).toContain('no lease for 10.9.9.9');
    const bad = await f.cli('--local', 'lease', '10.0.0');
    expect(bad.code).toBe(2);
    const none = await f.cli('--local', 'lease');
    expect(none.code).toBe(2);
    expect(none.err).toContain('missing argument');
  });

  it("enis: lists the cluster's ENIs as EC2 reports them, per instance too", async () => {
    const run = await f.cli('--local', '--json', 'enis');
    expect(run.code, run.err).toBe(0);
    const enis = run.json as {
      eniId: string;
      tags: Record<string, string>;
      attachment: { deleteOnTermination: boolean };
    }[];
    const nodes = await f.store.listNodes();
    const recorded = nodes.flatMap((n) => n.enis.map((e) => e.eniId)).sort();
    expect(enis.map((e) => e.eniId).sort()).toEqual(recorded);
    expect(enis.every((e) => e.attachment.deleteOnTermination)).toBe(true);

    const one = await f.cli('--local', '--json', 'enis', '--instance', f.instanceIds[0]!);
    const mine = one.json as { tags: Record<string, string> }[];
    expect(mine.length).toBeGreaterThan(0);
    expect(mine.every((e) => e.tags[ENI_TAGS.instance] === f.instanceIds[0])).toBe(true);
    const text = await f.cli('--local', 'enis');
    expect(text.out.split('\n')[0]).toMatch(/^ENI\s+INSTANCE\s+DEV\s+STATUS\s+DOT/);
  });

  it('audit: exit 0 when EC2 and the table agree, 1 once an address is unassigned behind its back', async () => {
    const clean = await f.cli('--local', 'audit');
    expect(clean.code, clean.out + clean.err).toBe(0);
    expect(clean.out).toContain('no drift');

    const victim = (await f.store.listLeases(f.arnOf(f.instanceIds[0]!), { state: 'FREE' }))[0]!;
    const ec2 = new EC2Client({ region: f.cloud.region, endpoint: f.cloud.endpoints.ec2, credentials });
    await ec2.send(
      new UnassignPrivateIpAddressesCommand({ NetworkInterfaceId: victim.eniId, PrivateIpAddresses: [victim.ip] }),
    );
    ec2.destroy();
    const drift = await f.cli('--local', '--json', 'audit');
    expect(drift.code).toBe(1);
    const report = drift.json as { clean: boolean; violations: { invariant: number; ip?: string }[] };
    expect(report.clean).toBe(false);
    expect(report.violations).toContainEqual(expect.objectContaining({ invariant: 2, ip: victim.ip }));
    const text = await f.cli('--local', 'audit');
    expect(text.code).toBe(1);
    expect(text.out).toContain(`lease ${victim.ip}`);
  });

  it('gc: --dry-run shows the mark a leaked ENI would get and changes nothing; gc then marks it', async () => {
    const ec2 = new EC2Client({ region: f.cloud.region, endpoint: f.cloud.endpoints.ec2, credentials });
    const created = await ec2.send(
      new CreateNetworkInterfaceCommand({
        SubnetId: f.cloud.network!.subnetIds[0]!,
        TagSpecifications: [
          {
            ResourceType: 'network-interface',
            Tags: [
              { Key: ENI_TAGS.cluster, Value: 'vpc-lease' },
              { Key: ENI_TAGS.instance, Value: 'i-0000000000000dead' },
              { Key: ENI_TAGS.owner, Value: 'instance-lifecycle' },
              { Key: ENI_TAGS.createdAt, Value: '2020-01-01T00:00:00.000Z' },
            ],
          },
        ],
      }),
    );
    ec2.destroy();
    const leaked = created.NetworkInterface!.NetworkInterfaceId!;
    const dry = await f.cli('--local', '--json', 'gc', '--dry-run');
    expect(dry.code, dry.err).toBe(0);
    expect((dry.json as { eniActions: { eniId: string; action: string }[] }).eniActions).toContainEqual(
      expect.objectContaining({ eniId: leaked, action: 'mark' }),
    );
    const still = await f.cli('--local', '--json', 'enis');
    const before = (still.json as { eniId: string; tags: Record<string, string> }[]).find((e) => e.eniId === leaked);
    expect(before?.tags[GC_MARK_TAG]).toBeUndefined();

    const run = await f.cli('--local', '--json', 'gc');
    expect(run.code, run.err).toBe(0);
    expect((run.json as { marked: string[] }).marked).toEqual([leaked]);
    const after = await f.cli('--local', '--json', 'enis');
    const marked = (after.json as { eniId: string; tags: Record<string, string> }[]).find((e) => e.eniId === leaked);
    expect(marked?.tags[GC_MARK_TAG]).toBeDefined();
  });

  it("gc: --dry-run prints the reconciler's own plan, stray-lease partitions included, and writes no mark", async () => {
    // Leases with no node item, of an instance EC2 does not know: the plan marks them on this pass.
    const strayId = 'i-000000000000057a7';
    const strayArn = f.arnOf(strayId);
    await f.store.putLeases(newLeases(strayArn, 2), Date.now());
    try {
      const dry = await f.cli('--local', '--json', 'gc', '--dry-run');
      expect(dry.code, dry.err).toBe(0);
      expect((dry.json as { strayLeases: { instanceId: string; action: string }[] }).strayLeases).toEqual([
        expect.objectContaining({ instanceId: strayId, action: 'mark' }),
      ]);
      const text = await f.cli('--local', 'gc', '--dry-run');
      expect(text.out).toContain(`would mark (removed by a later pass) the stray leases of ${strayId}`);
      expect([...(await f.leasePartitions.strayMarks()).keys()]).toEqual([]);

      const run = await f.cli('--local', '--json', 'gc');
      expect(run.code, run.err).toBe(0);
      expect((run.json as { strayLeases: { instanceId: string; action: string }[] }).strayLeases).toEqual([
        expect.objectContaining({ instanceId: strayId, action: 'mark' }),
      ]);
      expect([...(await f.leasePartitions.strayMarks()).keys()]).toEqual([strayArn]);
    } finally {
      await f.store.deleteNodePartition(strayArn);
      await f.leasePartitions.clearStrayMark(strayArn);
    }
  });

  it('dlq: lists a dead lifecycle event with the failure recorded on its node, and --redrive sends it back', async () => {
    const empty = await f.cli('--local', 'dlq');
    expect(empty.code, empty.err).toBe(0);
    expect(empty.out).toContain(': empty');

    // A FAILED node and the event that failed: once the launches' own re-enqueued work has drained, stop the
    // handler, then let SQS count the receives up to the DLQ.
    await until('event queue drained', () => {
      const c = f.deployment.queue.counts();
      return c.visible + c.inFlight + c.delayed === 0;
    });
    await f.deployment.mapping.stop();
    const instanceId = 'i-0000000000000bad1';
    await f.store.createNode({
      instanceArn: f.arnOf(instanceId),
      instanceId,
      instanceType: 'm5.large',
      availabilityZone: 'us-east-1a',
      podSubnetIds: [],
      phase: 'FAILED',
      failureReason: 'subnets-exhausted: no room in subnet-1',
      enis: [],
      maxPods: 20,
      createdAtMs: Date.now(),
      updatedAtMs: Date.now(),
      version: 1,
    });
    const sqs = new SQSClient({ region: f.cloud.region, endpoint: f.cloud.endpoints.sqs, credentials });
    const queueUrl = f.deployment.queue.url();
    const event = (id: string, extra: Record<string, unknown> = {}) =>
      JSON.stringify({
        version: '0',
        id: `e-${id}`,
        'detail-type': 'EC2 Instance-launch Lifecycle Action',
        source: 'aws.autoscaling',
        account: f.cloud.accountId,
        time: new Date().toISOString(),
        region: f.cloud.region,
        resources: [],
        detail: {
          LifecycleActionToken: `token-${id}`,
          LifecycleHookName: 'vpc-lease-launch',
          EC2InstanceId: id,
          AutoScalingGroupName: 'cli-nodes',
          LifecycleTransition: 'autoscaling:EC2_INSTANCE_LAUNCHING',
        },
        ...extra,
      });
    await sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: event(instanceId) }));
    // A re-enqueued event carries the reason it waited (the lifecycle's requeue marker).
    const waited = 'i-0000000000000bad2';
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: queueUrl,
        MessageBody: event(waited, {
          vpcLease: { attempt: 4, heartbeatAtMs: 0, reason: 'throttled: RequestLimitExceeded' },
        }),
      }),
    );
    // And one the handler's parser refuses on every delivery.
    await sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: event('i-nope') }));
    for (let i = 0; i < 8 && f.deployment.dlq.counts().visible < 3; i += 1)
      await sqs.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, VisibilityTimeout: 0, MaxNumberOfMessages: 10 }));
    expect(f.deployment.dlq.counts().visible).toBe(3);

    const listed = await f.cli('--local', '--json', 'dlq');
    expect(listed.code, listed.err).toBe(0);
    const messages = (listed.json as { messages: { instanceId: string; lastError: string; transition: string }[] })
      .messages;
    expect(messages).toHaveLength(3);
    expect(messages).toContainEqual(
      expect.objectContaining({
        instanceId: 'i-nope',
        lastError: 'invalid event: EC2 Instance-launch Lifecycle Action has invalid EC2InstanceId i-nope',
      }),
    );
    expect(messages).toContainEqual(
      expect.objectContaining({
        instanceId,
        transition: 'autoscaling:EC2_INSTANCE_LAUNCHING',
        lastError: 'FAILED: subnets-exhausted: no room in subnet-1',
      }),
    );
    expect(messages).toContainEqual(
      expect.objectContaining({ instanceId: waited, lastError: 'attempt 4: throttled: RequestLimitExceeded' }),
    );
    const text = await f.cli('--local', 'dlq');
    expect(text.out).toContain('3 failed events');
    expect(text.out).toContain('vpc-lease dlq --redrive');

    const redrive = await f.cli('--local', '--json', 'dlq', '--redrive');
    expect(redrive.code, redrive.err).toBe(0);
    expect(redrive.json).toMatchObject({ redriven: 3 });
    await until('DLQ emptied', () => f.deployment.dlq.counts().visible + f.deployment.dlq.counts().inFlight === 0);
    const back = await sqs.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10 }));
    const ids = (back.Messages ?? []).map((m) => JSON.parse(m.Body ?? '{}').detail?.EC2InstanceId);
    expect(ids.sort()).toEqual([instanceId, waited, 'i-nope'].sort());
    sqs.destroy();
  });

  it('the node item, `vpc-lease max-pods <type>` and `vpc-lease-cni max-pods` on the node agree', async () => {
    const instanceId = f.instanceIds[0]!;
    const arn = f.arnOf(instanceId);
    // The configuration the local Lambdas run with, handed to each view as that view takes it.
    const config = controlPlaneConfigFromEnv(f.deployment.env);

    // 1. What the real lifecycle handler recorded when it launched the node.
    const node = (await f.store.getNode(arn))!;
    expect(node.phase).toBe('READY');

    // 2. The operator's CLI, for the node's type and the same settings (and its `nodes` view of the item).
    const flags = [...(config.prefixDelegation ? ['--prefix-delegation'] : []), '--max-pods-cap', `${config.maxPods}`];
    const cli = await f.cli('--json', 'max-pods', node.instanceType, ...flags);
    expect(cli.code, cli.err).toBe(0);
    const listed = await f.cli('--local', '--json', 'nodes');
    const row = (listed.json as { instanceId: string; maxPods: number }[]).find((n) => n.instanceId === instanceId);

    // 3. The node's own command: its type from its IMDS, its settings from the installer's config.
    let out = '';
    let err = '';
    const code = await runMaxPods(
      ['--json', '--config', JSON.stringify({ prefixDelegation: config.prefixDelegation, maxPodsCap: config.maxPods })],
      { VPC_LEASE_TEST_MODE: '1', AWS_EC2_METADATA_SERVICE_ENDPOINT: await f.cloud.imds.endpointFor(instanceId) },
      { out: (t) => (out += t), err: (t) => (err += t) },
    );
    expect(code, err).toBe(0);
    const onNode = JSON.parse(out) as { instanceType: string; maxPods: number };

    expect(node.instanceType).toBe('m5.large');
    expect(onNode.instanceType).toBe(node.instanceType);
    // m5.large with the defaults: 2 pod ENIs × 9 addresses + 2 host-network pods (EKS's formula says 29).
    expect(node.maxPods).toBe(20);
    expect((cli.json as { maxPods: number }).maxPods).toBe(node.maxPods);
    expect(row?.maxPods).toBe(node.maxPods);
    expect(onNode.maxPods).toBe(node.maxPods);
    // And the pool holds no more leases than that figure.
    const held = (await f.store.listLeases(arn)).filter((l) => l.state !== 'RELEASING').length;
    expect(held).toBeGreaterThan(0);
    expect(held).toBeLessThanOrEqual(node.maxPods);
  });

  it('limits and max-pods: answer from the shipped instance table, or from EC2 with --from-ec2', async () => {
    const limits = await f.cli('--json', 'limits', 'm5.large');
    expect(limits.code, limits.err).toBe(0);
    expect(limits.json).toMatchObject({ instanceType: 'm5.large', maxEnis: 3, ipv4PerEni: 10, podEniSlots: 2 });
    const fromEc2 = await f.cli('--local', '--json', 'limits', 'm5.large', '--from-ec2');
    expect(fromEc2.json).toMatchObject({ maxEnis: 3, ipv4PerEni: 10 });

    const plain = await f.cli('max-pods', 'm5.large');
    expect(plain.out.split('\n')[0]).toBe('20'); // 2 pod ENIs × 9 addresses + 2 host-network pods
    const prefix = await f.cli('--json', 'max-pods', 'm5.large', '--prefix-delegation');
    expect(prefix.json).toMatchObject({ maxPods: 110, addressesPerPodEni: 144, capPods: 110 });
    const capped = await f.cli('--json', 'max-pods', 'c5.4xlarge', '--max-pods-cap', '50');
    expect(capped.json).toMatchObject({ maxPods: 50 });
    // IPv6: one /80 per pod ENI, so the cap decides; dual keeps the IPv4 figure; a bad family is a usage error.
    const v6 = await f.cli('--json', 'max-pods', 'm5.large', '--ip-family', 'ipv6');
    expect(v6.json).toMatchObject({ maxPods: 110, ipFamily: 'ipv6' });
    expect((await f.cli('--json', 'max-pods', 'm5.large', '--ip-family', 'dual')).json).toMatchObject({ maxPods: 20 });
    const badFamily = await f.cli('max-pods', 'm5.large', '--ip-family', 'ipv5');
    expect(badFamily.code).toBe(2);
    expect(badFamily.err).toContain('--ip-family');

    const unknown = await f.cli('limits', 'x9.huge');
    expect(unknown.code).toBe(1);
    expect(unknown.err).toContain('unknown instance type x9.huge');
    const badCap = await f.cli('max-pods', 'm5.large', '--max-pods-cap', '0');
    expect(badCap.code).toBe(2);
    const missing = await f.cli('max-pods');
    expect(missing.code).toBe(2);
  });

  it('local status: reports the running cloud of the state file', async () => {
    const run = await f.cli('--json', 'local', 'status');
    expect(run.code, run.err).toBe(0);
    expect(run.json).toMatchObject({ running: true, state: { pid: process.pid, tableName: 'vpc-lease' } });
  });

  it('talks to the same cloud through AWS_ENDPOINT_URL_* without --local', async () => {
    const run = await f.cliWithEnv({ ...f.cloud.env }, '--json', 'nodes');
    expect(run.code, run.err).toBe(0);
    expect((run.json as unknown[]).length).toBe(f.instanceIds.length + 1); // + the FAILED node of the dlq test
  });

  it('says which table is missing, exit 3', async () => {
    const run = await f.cli('--local', '--table', 'no-such-table', 'nodes');
    expect(run.code).toBe(3);
    expect(run.err).toContain('table no-such-table not found in the local cloud');
  });
});
