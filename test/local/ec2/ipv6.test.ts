import {
  type _InstanceType,
  AssignIpv6AddressesCommand,
  AttachNetworkInterfaceCommand,
  CreateLaunchTemplateCommand,
  CreateSubnetCommand,
  CreateVpcCommand,
  DeleteNetworkInterfaceCommand,
  DescribeInstancesCommand,
  DescribeSubnetsCommand,
  DescribeVpcsCommand,
  RunInstancesCommand,
  UnassignIpv6AddressesCommand,
} from '@aws-sdk/client-ec2';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ipv6Within, nthAddress, nthSubPrefix, parseIpv6 } from '../../../shared/ipv6.js';
import { createEni, describeEni, type Ec2Harness, errorCode, launchInstance, startHarness } from './harness.js';

let h: Ec2Harness;
let subnet64: string;

const assign = (eniId: string, extra: Record<string, unknown>) =>
  h.ec2.send(new AssignIpv6AddressesCommand({ NetworkInterfaceId: eniId, ...extra }));

/** An ENI attached to a fresh instance of `instanceType` at device index 1. */
async function attachedEni(instanceType: string, extra: Record<string, unknown> = {}): Promise<string> {
  const instanceId = await launchInstance(h, instanceType);
  const eniId = await createEni(h, extra);
  await h.ec2.send(
    new AttachNetworkInterfaceCommand({ NetworkInterfaceId: eniId, InstanceId: instanceId, DeviceIndex: 1 }),
  );
  return eniId;
}

async function ipv6Of(eniId: string): Promise<{ addresses: string[]; prefixes: string[] }> {
  const eni = await describeEni(h, eniId);
  return {
    addresses: (eni.Ipv6Addresses ?? []).map((a) => a.Ipv6Address as string),
    prefixes: (eni.Ipv6Prefixes ?? []).map((p) => p.Ipv6Prefix as string),
  };
}

describe('EC2 simulator: IPv6', () => {
  beforeEach(async () => {
    h = await startHarness();
    const out = await h.ec2.send(new DescribeSubnetsCommand({ SubnetIds: [h.subnetId] }));
    subnet64 = out.Subnets?.[0]?.Ipv6CidrBlockAssociationSet?.[0]?.Ipv6CidrBlock as string;
  });
  afterEach(async () => {
    await h.close();
  });

  it('gives seeded VPCs a /56 and their subnets a /64 inside it, in the SDK shapes', async () => {
    const vpcs = await h.ec2.send(new DescribeVpcsCommand({ VpcIds: [h.vpcId] }));
    const vpc56 = vpcs.Vpcs?.[0]?.Ipv6CidrBlockAssociationSet?.[0];
    expect(vpc56?.Ipv6CidrBlock).toMatch(/\/56$/);
    expect(vpc56?.Ipv6CidrBlockState?.State).toBe('associated');
    expect(vpc56?.Ipv6Pool).toBe('Amazon');
    expect(subnet64).toMatch(/\/64$/);
    expect(ipv6Within(vpc56?.Ipv6CidrBlock as string, subnet64)).toBe(true);
  });

  it('creates a VPC with an Amazon /56 and a subnet with a /64 only inside it, without overlaps', async () => {
    const vpc = await h.ec2.send(new CreateVpcCommand({ CidrBlock: '10.1.0.0/16', AmazonProvidedIpv6CidrBlock: true }));
    const block56 = vpc.Vpc?.Ipv6CidrBlockAssociationSet?.[0]?.Ipv6CidrBlock as string;
    const vpcId = vpc.Vpc?.VpcId as string;
    const first64 = nthSubPrefix(block56, 64, 1);
    const created = await h.ec2.send(
      new CreateSubnetCommand({ VpcId: vpcId, CidrBlock: '10.1.0.0/24', Ipv6CidrBlock: first64 }),
    );
    expect(created.Subnet?.Ipv6CidrBlockAssociationSet?.[0]?.Ipv6CidrBlock).toBe(first64);
    const again = h.ec2.send(
      new CreateSubnetCommand({ VpcId: vpcId, CidrBlock: '10.1.1.0/24', Ipv6CidrBlock: first64 }),
    );
    expect(await errorCode(again)).toBe('InvalidSubnet.Conflict');
    const outside = h.ec2.send(
      new CreateSubnetCommand({ VpcId: vpcId, CidrBlock: '10.1.2.0/24', Ipv6CidrBlock: subnet64 }),
    );
    expect(await errorCode(outside)).toBe('InvalidSubnet.Range');
  });

  it('assigns addresses by count and explicitly (canonical), inside the /64, and refuses taken or foreign ones', async () => {
    const eniId = await createEni(h);
    const out = await assign(eniId, { Ipv6AddressCount: 2 });
    expect(out.AssignedIpv6Addresses).toHaveLength(2);
    for (const a of out.AssignedIpv6Addresses ?? []) expect(ipv6Within(subnet64, a)).toBe(true);
    const chosen = nthAddress(subnet64, 0xabcd);
    const value = parseIpv6(chosen);
    // Fully written out in upper case: the simulator stores and answers the RFC 5952 form.
    const longForm = Array.from({ length: 8 }, (_, i) =>
      ((value >> BigInt(112 - 16 * i)) & 0xffffn).toString(16).toUpperCase().padStart(4, '0'),
    ).join(':');
    const explicit = await assign(eniId, { Ipv6Addresses: [longForm] });
    expect(explicit.AssignedIpv6Addresses).toEqual([chosen]);
    expect((await ipv6Of(eniId)).addresses).toEqual([...(out.AssignedIpv6Addresses ?? []), chosen]);
    const other = await createEni(h);
    expect(await errorCode(assign(other, { Ipv6Addresses: [chosen] }))).toBe('InvalidIPAddress.InUse');
    expect(await errorCode(assign(other, { Ipv6Addresses: ['2001:db8::1'] }))).toBe('InvalidParameterValue');
    const router = nthAddress(subnet64, 1);
    expect(await errorCode(assign(other, { Ipv6Addresses: [router] }))).toBe('InvalidParameterValue');
  });

  it('delegates a /80 inside the /64 whose addresses no one else can take', async () => {
    const eniId = await createEni(h);
    const out = await assign(eniId, { Ipv6PrefixCount: 1 });
    const prefix = out.AssignedIpv6Prefixes?.[0] as string;
    expect(prefix).toMatch(/\/80$/);
    expect(ipv6Within(subnet64, prefix)).toBe(true);
    expect((await ipv6Of(eniId)).prefixes).toEqual([prefix]);
    const inside = nthAddress(prefix, 7);
    expect(await errorCode(assign(await createEni(h), { Ipv6Addresses: [inside] }))).toBe('InvalidIPAddress.InUse');
    expect(await errorCode(assign(await createEni(h), { Ipv6Prefixes: [prefix] }))).toBe('InvalidIPAddress.InUse');
  });

  it('takes exactly one kind per Assign call', async () => {
    const eniId = await createEni(h);
    expect(await errorCode(assign(eniId, { Ipv6AddressCount: 1, Ipv6PrefixCount: 1 }))).toBe(
      'InvalidParameterCombination',
    );
    expect(await ipv6Of(eniId)).toEqual({ addresses: [], prefixes: [] });
  });

  it("caps IPv6 per ENI at the type's IPv4-per-interface figure, a /80 taking one slot", async () => {
    const eniId = await attachedEni('t3.nano'); // 2 addresses per interface
    await assign(eniId, { Ipv6AddressCount: 1 });
    await assign(eniId, { Ipv6PrefixCount: 1 });
    expect(await errorCode(assign(eniId, { Ipv6AddressCount: 1 }))).toBe('InvalidParameterValue');
    expect((await ipv6Of(eniId)).addresses).toHaveLength(1);
  });

  it('refuses to attach an ENI holding more IPv6 than the type allows', async () => {
    const instanceId = await launchInstance(h, 't3.nano');
    const eniId = await createEni(h, { Ipv6AddressCount: 3 });
    const attach = h.ec2.send(
      new AttachNetworkInterfaceCommand({ NetworkInterfaceId: eniId, InstanceId: instanceId, DeviceIndex: 1 }),
    );
    expect(await errorCode(attach)).toBe('InvalidParameterValue');
    expect((await describeEni(h, eniId)).Attachment).toBeUndefined();
  });

  it('delegates /80s only on Nitro types', async () => {
    const xen = await attachedEni('t2.medium');
    expect(await errorCode(assign(xen, { Ipv6PrefixCount: 1 }))).toBe('InvalidParameterValue');
    await assign(xen, { Ipv6AddressCount: 1 }); // addresses are fine on Xen
    const nitro = await attachedEni('m5.large');
    expect((await assign(nitro, { Ipv6PrefixCount: 1 })).AssignedIpv6Prefixes).toHaveLength(1);
  });

  it('refuses IPv6 in a subnet without a /64', async () => {
    const vpc = await h.ec2.send(new CreateVpcCommand({ CidrBlock: '10.2.0.0/16' }));
    const subnet = await h.ec2.send(new CreateSubnetCommand({ VpcId: vpc.Vpc?.VpcId, CidrBlock: '10.2.0.0/24' }));
    expect(subnet.Subnet?.Ipv6CidrBlockAssociationSet).toBeUndefined();
    const eniId = await createEni(h, { SubnetId: subnet.Subnet?.SubnetId });
    expect(await errorCode(assign(eniId, { Ipv6AddressCount: 1 }))).toBe('InvalidParameterValue');
  });

  it('unassigns addresses and prefixes, refusing the whole call if one is not assigned', async () => {
    const eniId = await createEni(h);
    const [a, b] = (await assign(eniId, { Ipv6AddressCount: 2 })).AssignedIpv6Addresses ?? [];
    const prefix = (await assign(eniId, { Ipv6PrefixCount: 1 })).AssignedIpv6Prefixes?.[0] as string;
    const unassign = (extra: Record<string, unknown>) =>
      h.ec2.send(new UnassignIpv6AddressesCommand({ NetworkInterfaceId: eniId, ...extra }));
    expect(await errorCode(unassign({ Ipv6Addresses: [a, '2001:db8::9'] }))).toBe('InvalidParameterValue');
    expect((await ipv6Of(eniId)).addresses).toEqual([a, b]);
    const out = await unassign({ Ipv6Addresses: [a], Ipv6Prefixes: [prefix] });
    expect(out.UnassignedIpv6Addresses).toEqual([a]);
    expect(out.UnassignedIpv6Prefixes).toEqual([prefix]);
    expect(await ipv6Of(eniId)).toEqual({ addresses: [b], prefixes: [] });
    // Given back: another ENI can take the same /80 now.
    expect((await assign(await createEni(h), { Ipv6Prefixes: [prefix] })).AssignedIpv6Prefixes).toEqual([prefix]);
  });

  it('creates ENIs with IPv6 (addresses or a /80, not both) and frees them on delete', async () => {
    const withPrefix = await createEni(h, { Ipv6PrefixCount: 1 });
    const { prefixes } = await ipv6Of(withPrefix);
    expect(prefixes).toHaveLength(1);
    expect(await errorCode(createEni(h, { Ipv6AddressCount: 1, Ipv6PrefixCount: 1 }))).toBe('InvalidParameterValue');
    await h.ec2.send(new DeleteNetworkInterfaceCommand({ NetworkInterfaceId: withPrefix }));
    const again = await createEni(h, { Ipv6Prefixes: [{ Ipv6Prefix: prefixes[0] }] });
    expect((await ipv6Of(again)).prefixes).toEqual(prefixes);
  });

  it("launches from a template whose pod ENI asks for a /80, and refuses a launch over the type's IPv6 figures", async () => {
    await h.ec2.send(
      new CreateLaunchTemplateCommand({
        LaunchTemplateName: 'v6',
        LaunchTemplateData: {
          InstanceType: 'm5.large',
          NetworkInterfaces: [
            { DeviceIndex: 0, SubnetId: h.subnetId, Ipv6AddressCount: 1 },
            { DeviceIndex: 1, SubnetId: h.subnetId, Ipv6PrefixCount: 1 },
          ],
        },
      }),
    );
    const run = await h.ec2.send(
      new RunInstancesCommand({ LaunchTemplate: { LaunchTemplateName: 'v6' }, MinCount: 1, MaxCount: 1 }),
    );
    const enis = run.Instances?.[0]?.NetworkInterfaces ?? [];
    const bootEni = enis.find((e) => e.Attachment?.DeviceIndex === 0);
    const podEni = enis.find((e) => e.Attachment?.DeviceIndex === 1);
    expect(bootEni?.Ipv6Addresses).toHaveLength(1);
    expect(podEni?.Ipv6Prefixes?.[0]?.Ipv6Prefix).toMatch(/\/80$/);
    const count = async () =>
      ((await h.ec2.send(new DescribeInstancesCommand({}))).Reservations ?? []).flatMap((r) => r.Instances ?? [])
        .length;
    const before = await count();
    const launch = (instanceType: string, spec: Record<string, unknown>) =>
      h.ec2.send(
        new RunInstancesCommand({
          InstanceType: instanceType as _InstanceType,
          MinCount: 1,
          MaxCount: 1,
          NetworkInterfaces: [
            { DeviceIndex: 0, SubnetId: h.subnetId },
            { DeviceIndex: 1, ...spec },
          ],
        }),
      );
    expect(await errorCode(launch('t3.nano', { Ipv6AddressCount: 3 }))).toBe('InvalidParameterValue');
    expect(await errorCode(launch('m4.large', { Ipv6PrefixCount: 1 }))).toBe('InvalidParameterValue');
    expect(await count()).toBe(before);
  });
});
