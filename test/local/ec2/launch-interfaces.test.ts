import {
  type _InstanceType,
  CreateLaunchTemplateCommand,
  DescribeInstancesCommand,
  DescribeNetworkInterfacesCommand,
  type InstanceNetworkInterfaceSpecification,
  ModifySubnetAttributeCommand,
  RunInstancesCommand,
  TerminateInstancesCommand,
} from '@aws-sdk/client-ec2';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type Ec2Harness, errorCode, startHarness, subnetFreeCount, waitFor } from './harness.js';

let h: Ec2Harness;
let podSubnet: string;

const TAGS = [{ ResourceType: 'network-interface' as const, Tags: [{ Key: 'vpc-lease:cluster', Value: 'c1' }] }];

function run(
  networkInterfaces: InstanceNetworkInterfaceSpecification[],
  instanceType = 'm5.large',
): Promise<{ instanceId: string }> {
  return h.ec2
    .send(
      new RunInstancesCommand({
        InstanceType: instanceType as _InstanceType,
        MinCount: 1,
        MaxCount: 1,
        NetworkInterfaces: networkInterfaces,
        TagSpecifications: TAGS,
      }),
    )
    .then((out) => ({ instanceId: out.Instances?.[0]?.InstanceId as string }));
}

const boot = (): InstanceNetworkInterfaceSpecification => ({ DeviceIndex: 0, SubnetId: h.subnetId });

async function instanceCount(): Promise<number> {
  const out = await h.ec2.send(new DescribeInstancesCommand({}));
  return (out.Reservations ?? []).flatMap((r) => r.Instances ?? []).length;
}

describe('EC2 simulator: RunInstances with NetworkInterfaces', () => {
  beforeEach(async () => {
    h = await startHarness({ timeScale: 0.001 });
    podSubnet = h.sim.admin.seedSubnet(h.vpcId, '10.0.8.0/24', 'us-east-1a').subnetId;
  });
  afterEach(async () => {
    await h.close();
  });

  it('creates and attaches each ENI at launch with its addresses, prefixes, tags and DeleteOnTermination', async () => {
    const bootFree = await subnetFreeCount(h);
    const podFree = await subnetFreeCount(h, podSubnet);
    const { instanceId } = await run([
      boot(),
      { DeviceIndex: 1, SecondaryPrivateIpAddressCount: 9, DeleteOnTermination: true },
      { DeviceIndex: 2, SubnetId: podSubnet, Ipv4PrefixCount: 2, DeleteOnTermination: true },
    ]);
    const enis = await h.ec2.send(
      new DescribeNetworkInterfacesCommand({
        Filters: [{ Name: 'attachment.instance-id', Values: [instanceId] }],
        MaxResults: 100,
      }),
    );
    const byIndex = new Map((enis.NetworkInterfaces ?? []).map((e) => [e.Attachment?.DeviceIndex, e]));
    expect([...byIndex.keys()].sort()).toEqual([0, 1, 2]);
    const one = byIndex.get(1)!;
    expect(one.SubnetId).toBe(h.subnetId);
    expect(one.PrivateIpAddresses).toHaveLength(10);
    expect(one.Attachment).toMatchObject({ Status: 'attached', DeleteOnTermination: true });
    expect(one.TagSet).toEqual([{ Key: 'vpc-lease:cluster', Value: 'c1' }]);
    const two = byIndex.get(2)!;
    expect(two.SubnetId).toBe(podSubnet);
    expect(two.Ipv4Prefixes).toHaveLength(2);
    // EC2 applies network-interface tags to every ENI the launch creates, the boot ENI included.
    expect(byIndex.get(0)!.TagSet).toEqual([{ Key: 'vpc-lease:cluster', Value: 'c1' }]);
    expect(await subnetFreeCount(h)).toBe(bootFree - 1 - 10);
    expect(await subnetFreeCount(h, podSubnet)).toBe(podFree - 1 - 32);

    const described = await h.ec2.send(new DescribeInstancesCommand({ InstanceIds: [instanceId] }));
    const views = described.Reservations?.[0]?.Instances?.[0]?.NetworkInterfaces ?? [];
    expect(views.find((v) => v.Attachment?.DeviceIndex === 2)?.Ipv4Prefixes).toHaveLength(2);

    await h.ec2.send(new TerminateInstancesCommand({ InstanceIds: [instanceId] }));
    await waitFor(
      async () => (h.sim.api.getInstance(instanceId)?.state === 'terminated' ? true : undefined),
      'terminated',
    );
    expect(await subnetFreeCount(h)).toBe(bootFree);
    expect(await subnetFreeCount(h, podSubnet)).toBe(podFree);
  });

  it('refuses a device index used twice', async () => {
    expect(await errorCode(run([boot(), { DeviceIndex: 1 }, { DeviceIndex: 1 }]))).toBe('InvalidParameterValue');
    expect(await instanceCount()).toBe(0);
  });

  it("refuses more ENIs than the type allows (m5.large: 3), and allows exactly the type's number", async () => {
    const before = await subnetFreeCount(h);
    const four = [boot(), { DeviceIndex: 1 }, { DeviceIndex: 2 }, { DeviceIndex: 3 }];
    expect(await errorCode(run(four))).toBe('AttachmentLimitExceeded');
    expect(await subnetFreeCount(h)).toBe(before);
    expect(await instanceCount()).toBe(0);
    await run(four.slice(0, 3));
    expect(await instanceCount()).toBe(1);
  });

  it("refuses more IPv4 addresses on one ENI than the type's limit (m5.large: 10, primary included)", async () => {
    expect(await errorCode(run([boot(), { DeviceIndex: 1, SecondaryPrivateIpAddressCount: 10 }]))).toBe(
      'PrivateIpAddressLimitExceeded',
    );
    // Each /28 takes one of the ten slots as well.
    expect(await errorCode(run([boot(), { DeviceIndex: 1, Ipv4PrefixCount: 10 }]))).toBe(
      'PrivateIpAddressLimitExceeded',
    );
    await run([boot(), { DeviceIndex: 1, SecondaryPrivateIpAddressCount: 9 }]);
    expect(await instanceCount()).toBe(1);
  });

  it('refuses an ENI that does not fit its subnet and gives back what the launch had taken', async () => {
    const small = h.sim.admin.seedSubnet(h.vpcId, '10.0.9.0/28', 'us-east-1a').subnetId; // 11 usable
    const bootFree = await subnetFreeCount(h);
    expect(
      await errorCode(
        run(
          [
            boot(),
            { DeviceIndex: 1, SecondaryPrivateIpAddressCount: 5 },
            { DeviceIndex: 2, SubnetId: small, SecondaryPrivateIpAddressCount: 11 },
          ],
          'm5.4xlarge',
        ),
      ),
    ).toBe('InsufficientFreeAddressesInSubnet');
    expect(await subnetFreeCount(h)).toBe(bootFree);
    expect(await subnetFreeCount(h, small)).toBe(11);
    expect(await instanceCount()).toBe(0);
    await run([boot(), { DeviceIndex: 1, SubnetId: small, SecondaryPrivateIpAddressCount: 10 }], 'm5.4xlarge');
    expect(await subnetFreeCount(h, small)).toBe(0);
  });

  it("refuses a pod subnet outside the boot subnet's AZ", async () => {
    const elsewhere = h.sim.admin.seedSubnet(h.vpcId, '10.0.10.0/24', 'us-east-1b').subnetId;
    expect(await errorCode(run([boot(), { DeviceIndex: 1, SubnetId: elsewhere }]))).toBe('InvalidParameterCombination');
    expect(await instanceCount()).toBe(0);
  });

  it('refuses prefixes on a type that is not Nitro (t2.medium) and takes them on one that is', async () => {
    expect(await errorCode(run([boot(), { DeviceIndex: 1, Ipv4PrefixCount: 1 }], 't2.medium'))).toBe(
      'InvalidParameterValue',
    );
    await run([boot(), { DeviceIndex: 1, Ipv4PrefixCount: 1 }], 'm5.large');
    expect(await instanceCount()).toBe(1);
  });

  it('refuses AssociatePublicIpAddress with more than one ENI; with one ENI it assigns a public IPv4', async () => {
    expect(await errorCode(run([{ ...boot(), AssociatePublicIpAddress: true }, { DeviceIndex: 1 }]))).toBe(
      'InvalidParameterCombination',
    );
    expect(await instanceCount()).toBe(0);
    const { instanceId } = await run([{ ...boot(), AssociatePublicIpAddress: true }]);
    expect(h.sim.api.getInstance(instanceId)?.publicIpAddress).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
  });

  it("loses the subnet's auto-assigned public IPv4 when the launch has more than one ENI", async () => {
    await h.ec2.send(new ModifySubnetAttributeCommand({ SubnetId: h.subnetId, MapPublicIpOnLaunch: { Value: true } }));
    const single = await run([boot()]);
    const multi = await run([boot(), { DeviceIndex: 1 }]);
    const out = await h.ec2.send(new DescribeInstancesCommand({ InstanceIds: [single.instanceId, multi.instanceId] }));
    const publicIp = new Map(
      (out.Reservations ?? []).flatMap((r) => r.Instances ?? []).map((i) => [i.InstanceId, i.PublicIpAddress]),
    );
    expect(publicIp.get(single.instanceId)).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    expect(publicIp.get(multi.instanceId)).toBeUndefined();
  });

  it('launches from a launch template that declares NetworkInterfaces and network-interface tags', async () => {
    const created = await h.ec2.send(
      new CreateLaunchTemplateCommand({
        LaunchTemplateName: 'nodes-with-pod-enis',
        LaunchTemplateData: {
          InstanceType: 'm5.large',
          NetworkInterfaces: [
            { DeviceIndex: 0, SubnetId: h.subnetId },
            { DeviceIndex: 1, SecondaryPrivateIpAddressCount: 4, DeleteOnTermination: true },
          ],
          TagSpecifications: TAGS,
        },
      }),
    );
    expect(created.LaunchTemplate?.LaunchTemplateId).toMatch(/^lt-[0-9a-f]{17}$/);
    const out = await h.ec2.send(
      new RunInstancesCommand({
        MinCount: 1,
        MaxCount: 1,
        LaunchTemplate: { LaunchTemplateName: 'nodes-with-pod-enis', Version: '$Latest' },
      }),
    );
    const nics = out.Instances?.[0]?.NetworkInterfaces ?? [];
    expect(nics.map((n) => [n.Attachment?.DeviceIndex, n.PrivateIpAddresses?.length])).toEqual([
      [0, 1],
      [1, 5],
    ]);
    expect(
      await errorCode(
        h.ec2.send(
          new RunInstancesCommand({ MinCount: 1, MaxCount: 1, LaunchTemplate: { LaunchTemplateName: 'none' } }),
        ),
      ),
    ).toBe('InvalidLaunchTemplateId.NotFound');
  });
});
