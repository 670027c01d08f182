import {
  AssignPrivateIpAddressesCommand,
  AttachNetworkInterfaceCommand,
  CreateNetworkInterfaceCommand,
  DescribeNetworkInterfacesCommand,
  DescribeSubnetsCommand,
  UnassignPrivateIpAddressesCommand,
} from '@aws-sdk/client-ec2';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { InstanceStateChange } from '../../../local-cloud/ports.js';
import { type Ec2Harness, errorCode, startHarness, waitFor } from './harness.js';

let h: Ec2Harness;

function outcomes(results: PromiseSettledResult<unknown>[]): string[] {
  return results.map((r) => (r.status === 'fulfilled' ? 'ok' : (r.reason as Error).name));
}

async function enis(count: number): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const created = await h.ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: h.subnetId }));
    out.push(created.NetworkInterface?.NetworkInterfaceId as string);
  }
  return out;
}

describe('EC2 simulator: concurrent callers', () => {
  beforeEach(async () => {
    // The latency model on (scaled down) so concurrent requests really interleave.
    h = await startHarness({ latency: true, timeScale: 0.05, seed: 3 });
  });
  afterEach(async () => {
    await h.close();
  });

  it('lets exactly one of many concurrent attaches at the same device index win', async () => {
    const instanceId = h.sim.api.launchInstance({ instanceType: 'm5.4xlarge', subnetId: h.subnetId }).instanceId;
    const candidates = await enis(6);
    const results = await Promise.allSettled(
      candidates.map((eniId) =>
        h.ec2.send(
          new AttachNetworkInterfaceCommand({ NetworkInterfaceId: eniId, InstanceId: instanceId, DeviceIndex: 1 }),
        ),
      ),
    );
    const seen = outcomes(results);
    expect(seen.filter((o) => o === 'ok')).toHaveLength(1);
    expect(seen.filter((o) => o !== 'ok')).toEqual(Array(5).fill('InvalidParameterValue'));
    const attached = await h.ec2.send(
      new DescribeNetworkInterfacesCommand({ Filters: [{ Name: 'attachment.device-index', Values: ['1'] }] }),
    );
    expect(attached.NetworkInterfaces).toHaveLength(1);
  });

  it('never lets concurrent attaches exceed the instance type ENI limit', async () => {
    const instanceId = h.sim.api.launchInstance({ instanceType: 'm5.large', subnetId: h.subnetId }).instanceId; // 3 ENIs
    const candidates = await enis(5);
    const results = await Promise.allSettled(
      candidates.map((eniId, i) =>
        h.ec2.send(
          new AttachNetworkInterfaceCommand({ NetworkInterfaceId: eniId, InstanceId: instanceId, DeviceIndex: i + 1 }),
        ),
      ),
    );
    const seen = outcomes(results);
    expect(seen.filter((o) => o === 'ok')).toHaveLength(2);
    expect(seen.filter((o) => o !== 'ok')).toEqual([
      'AttachmentLimitExceeded',
      'AttachmentLimitExceeded',
      'AttachmentLimitExceeded',
    ]);
    expect(h.sim.api.instanceInterfaces(instanceId)).toHaveLength(3);
  });

  it('keeps addresses unique and the subnet count exact under concurrent assign and unassign', async () => {
    const [a, b] = await enis(2);
    const start = await h.ec2.send(new DescribeSubnetsCommand({ SubnetIds: [h.subnetId] }));
    const free = start.Subnets?.[0]?.AvailableIpAddressCount as number;
    const assigns = await Promise.all(
      [a, b, a, b].map((eniId) =>
        h.ec2.send(
          new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: eniId, SecondaryPrivateIpAddressCount: 5 }),
        ),
      ),
    );
    const given = assigns.flatMap((r) => r.AssignedPrivateIpAddresses?.map((p) => p.PrivateIpAddress as string) ?? []);
    expect(new Set(given).size).toBe(20);
    const toRelease = assigns[0]?.AssignedPrivateIpAddresses?.map((p) => p.PrivateIpAddress as string) ?? [];
    const releases = await Promise.allSettled([
      h.ec2.send(new UnassignPrivateIpAddressesCommand({ NetworkInterfaceId: a, PrivateIpAddresses: toRelease })),
      h.ec2.send(new UnassignPrivateIpAddressesCommand({ NetworkInterfaceId: a, PrivateIpAddresses: toRelease })),
    ]);
    // The second identical unassign finds the addresses gone: one wins, one is refused, none freed twice.
    expect(outcomes(releases).sort()).toEqual(['InvalidParameterValue', 'ok']);
    const end = await h.ec2.send(new DescribeSubnetsCommand({ SubnetIds: [h.subnetId] }));
    expect(end.Subnets?.[0]?.AvailableIpAddressCount).toBe(free - 15);
    const listed = await h.ec2.send(
      new DescribeNetworkInterfacesCommand({ Filters: [{ Name: 'subnet-id', Values: [h.subnetId] }] }),
    );
    const all =
      listed.NetworkInterfaces?.flatMap((e) => e.PrivateIpAddresses?.map((p) => p.PrivateIpAddress) ?? []) ?? [];
    expect(new Set(all).size).toBe(all.length);
    expect(all).toHaveLength(2 + 15);
  });

  it('rejects Describe by ids together with MaxResults', async () => {
    const [eniId] = await enis(1);
    expect(
      await errorCode(
        h.ec2.send(new DescribeNetworkInterfacesCommand({ NetworkInterfaceIds: [eniId as string], MaxResults: 5 })),
      ),
    ).toBe('InvalidParameterCombination');
  });

  it('serves IMDS and Auto Scaling the same interfaces the Query API shows, and stops its timers on close', async () => {
    const changes: InstanceStateChange[] = [];
    h.sim.api.onInstanceStateChange((c) => changes.push(c));
    const instance = h.sim.api.launchInstance({ instanceType: 'm5.large', subnetId: h.subnetId, tags: { k: 'v' } });
    expect(instance).toMatchObject({
      region: 'us-east-1',
      accountId: '123456789012',
      vpcId: h.vpcId,
      tags: { k: 'v' },
    });
    const [eniId] = await enis(1);
    await h.ec2.send(
      new AttachNetworkInterfaceCommand({ NetworkInterfaceId: eniId, InstanceId: instance.instanceId, DeviceIndex: 1 }),
    );
    await h.ec2.send(new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: eniId, Ipv4PrefixCount: 1 }));
    const views = h.sim.api.instanceInterfaces(instance.instanceId);
    const described = await h.ec2.send(
      new DescribeNetworkInterfacesCommand({
        Filters: [{ Name: 'attachment.instance-id', Values: [instance.instanceId] }],
      }),
    );
    for (const view of views) {
      const eni = described.NetworkInterfaces?.find((e) => e.NetworkInterfaceId === view.eniId);
      expect(view.mac).toBe(eni?.MacAddress);
      expect(view.privateIpAddresses).toEqual(eni?.PrivateIpAddresses?.map((p) => p.PrivateIpAddress));
      expect(view.ipv4Prefixes).toEqual(eni?.Ipv4Prefixes?.map((p) => p.Ipv4Prefix) ?? []);
      expect(view.subnetCidr).toBe('10.0.1.0/24');
      expect(view.vpcCidrs).toEqual(['10.0.0.0/16']);
      expect(view.deviceIndex).toBe(eni?.Attachment?.DeviceIndex);
    }
    expect(views.map((v) => v.deviceIndex)).toEqual([0, 1]);
    await waitFor(async () => (changes.some((c) => c.state === 'running') ? true : undefined), 'running');
    h.sim.api.terminateInstance(instance.instanceId);
    await h.close();
    const seen = changes.length;
    await new Promise((resolve) => setTimeout(resolve, 50));
    // shutting-down was reported; the terminated transition was dropped with the closed simulator.
    expect(changes.length).toBe(seen);
    expect(changes.at(-1)?.state).toBe('shutting-down');
    h = await startHarness();
  });
});
