import { afterEach, describe, expect, it } from 'vitest';
import type { Ec2Port } from '../../shared/ec2/port.js';
import { createLifecycleRecordHandler } from '../../shared/lifecycle/record-handler.js';
import { createLogger } from '../../shared/log.js';
import { launchEventBody } from './support/events.js';
import { Harness } from './support/harness.js';

/** The tags and description aws-node gives the ENIs it creates (EKS adds the owner tag). */
const awsNodeTags = (instanceId: string) => ({
  'node.k8s.amazonaws.com/instance_id': instanceId,
  'node.k8s.amazonaws.com/createdAt': '2026-12-01T00:00:00Z',
  'eks:eni:owner': 'amazon-vpc-cni',
});

describe('Launch: ENIs the launch did not create (EC2 simulator + dynalite)', () => {
  let h: Harness;
  let lines: Record<string, unknown>[];
  const start = async (): Promise<void> => {
    lines = [];
    h = await Harness.start({
      ec2: { timeScale: 0.001 },
      logger: createLogger({ sink: (l) => lines.push(JSON.parse(l) as Record<string, unknown>) }),
    });
  };
  afterEach(async () => {
    await h?.close();
  });

  /** Another agent's ENI, created and attached through the same EC2 API (the SDK client on the simulator). */
  async function attachOthersEni(
    ec2: Ec2Port,
    instanceId: string,
    deviceIndex: number,
    tags: Record<string, string>,
  ): Promise<string> {
    const eni = await ec2.createNetworkInterface({
      subnetId: h.subnetId,
      securityGroupIds: [],
      ipCount: 2,
      prefixCount: 0,
      tags,
      clientToken: `other-${instanceId}-${deviceIndex}`,
      description: `aws-K8S-${instanceId}`,
    });
    await ec2.attachNetworkInterface({ eniId: eni.eniId, instanceId, deviceIndex, networkCardIndex: 0 });
    return eni.eniId;
  }

  it('fails the launch, naming aws-node’s ENI and the fix, when aws-node attached one before the launch event', async () => {
    await start();
    const id = h.launchInstance('m5.large');
    const foreign = await attachOthersEni(h.deps().ec2, id, 1, awsNodeTags(id));
    h.sim.admin.resetCounts();
    await h.drive(launchEventBody(id));
    const node = await h.store.getNode(h.instanceArnOf(id));
    expect(node?.phase).toBe('FAILED');
    expect(node?.failureReason).toMatch(/^foreign-cni: /);
    expect(node?.failureReason).toContain(`${foreign} at device index 1`);
    expect(node?.failureReason).toContain('kubectl -n kube-system delete daemonset aws-node');
    const logged = lines.find((l) => l['msg'] === 'abandoning launch');
    expect(logged?.['reason']).toBe(node?.failureReason);
    expect(h.autoScaling.completed.map((c) => c.result)).toEqual(['ABANDON']);
    // Not retried and nothing created beside it; aws-node's ENI is left where it is.
    expect(h.sim.admin.counts()['CreateNetworkInterface']).toBeUndefined();
    expect(h.sim.api.instanceInterfaces(id).find((i) => i.deviceIndex === 1)?.eniId).toBe(foreign);
  });

  it('plans around an ENI of no CNI (negative control: the same ENI without aws-node’s tags)', async () => {
    await start();
    const id = h.launchInstance('m5.large');
    await attachOthersEni(h.deps().ec2, id, 1, { purpose: 'storage-network' });
    await h.drive(launchEventBody(id));
    const node = await h.store.getNode(h.instanceArnOf(id));
    expect(node?.phase).toBe('READY');
    expect(node?.failureReason).toBeUndefined();
    expect(node?.enis.map((e) => e.deviceIndex)).toEqual([2]);
  });

  it('fails clearly, without retrying, when another ENI takes a planned device index after the plan', async () => {
    await start();
    const id = h.launchInstance('m5.large');
    let intruding: Promise<string> | undefined;
    // The race with aws-node: its attach lands between our plan and our attach, at the index we planned.
    const base = h.deps();
    const racing: Ec2Port = Object.assign(Object.create(base.ec2) as Ec2Port, {
      attachNetworkInterface: async (r: Parameters<Ec2Port['attachNetworkInterface']>[0]) => {
        // Only the first attach races (the ENIs attach in parallel): one intruder, at that ENI's index.
        intruding ??= attachOthersEni(base.ec2, id, r.deviceIndex, { purpose: 'another-agent' });
        await intruding;
        return base.ec2.attachNetworkInterface(r);
      },
    });
    h.sim.admin.resetCounts();
    await createLifecycleRecordHandler(h.deps(undefined, { ec2: racing }))(launchEventBody(id));
    expect(h.requeue.queued).toHaveLength(0);
    const node = await h.store.getNode(h.instanceArnOf(id));
    expect(node?.phase).toBe('FAILED');
    expect(node?.failureReason).toMatch(/^foreign-eni: device index 1 of i-[0-9a-f]+, planned for a pod ENI/);
    expect(node?.failureReason).toContain(await intruding);
    expect(lines.find((l) => l['msg'] === 'abandoning launch')?.['reason']).toBe(node?.failureReason);
    // Each planned ENI attached once, plus the intruder's: the refused attach is not retried.
    const plannedLine = lines.find((l) => l['msg'] === 'launch planned');
    expect(plannedLine).toBeDefined();
    const planned = (plannedLine!['enis'] as unknown[]).length;
    expect(h.sim.admin.counts()['AttachNetworkInterface']?.calls).toBe(planned + 1);
  });
});
