import {
  AssignPrivateIpAddressesCommand,
  AttachNetworkInterfaceCommand,
  CreateNetworkInterfaceCommand,
  CreateSecurityGroupCommand,
  CreateSubnetCommand,
  DeleteNetworkInterfaceCommand,
  DescribeNetworkInterfacesCommand,
  type NetworkInterface,
  UnassignPrivateIpAddressesCommand,
} from '@aws-sdk/client-ec2';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { addressesOf, cidrContains, parseCidr, parseIpv4 } from '../../../shared/ipv4.js';
import {
  createEni as createEniIn,
  describeEni as describeEniIn,
  type Ec2Harness,
  errorCode,
  startHarness,
  subnetFreeCount,
} from './harness.js';

let h: Ec2Harness;

const createEni = (extra?: Record<string, unknown>): Promise<string> => createEniIn(h, extra);
const describeEni = (eniId: string): Promise<NetworkInterface> => describeEniIn(h, eniId);
const freeCount = (subnetId?: string): Promise<number> => subnetFreeCount(h, subnetId);

describe('EC2 simulator: network interfaces', () => {
  beforeEach(async () => {
    h = await startHarness();
  });
  afterEach(async () => {
    await h.close();
  });

  it('creates an ENI with secondary addresses, tags and security groups inside its subnet', async () => {
    const sg = await h.ec2.send(
      new CreateSecurityGroupCommand({ GroupName: 'pods', Description: 'pods', VpcId: h.vpcId }),
    );
    const before = await freeCount();
    const out = await h.ec2.send(
      new CreateNetworkInterfaceCommand({
        SubnetId: h.subnetId,
        SecondaryPrivateIpAddressCount: 4,
        Groups: [sg.GroupId as string],
        Description: 'vpc-lease pods',
        TagSpecifications: [{ ResourceType: 'network-interface', Tags: [{ Key: 'vpc-lease/cluster', Value: 'c1' }] }],
      }),
    );
    const eni = out.NetworkInterface;
    expect(eni?.NetworkInterfaceId).toMatch(/^eni-[0-9a-f]{17}$/);
    expect(eni?.MacAddress).toMatch(/^02(:[0-9a-f]{2}){5}$/);
    expect(eni?.Status).toBe('available');
    expect(eni?.Description).toBe('vpc-lease pods');
    expect(eni?.Groups?.map((g) => g.GroupId)).toEqual([sg.GroupId]);
    expect(eni?.TagSet).toEqual([{ Key: 'vpc-lease/cluster', Value: 'c1' }]);
    const ips = eni?.PrivateIpAddresses?.map((p) => p.PrivateIpAddress as string) ?? [];
    expect(ips).toHaveLength(5);
    expect(new Set(ips).size).toBe(5);
    expect(eni?.PrivateIpAddresses?.filter((p) => p.Primary).map((p) => p.PrivateIpAddress)).toEqual([
      eni?.PrivateIpAddress,
    ]);
    const subnet = parseCidr('10.0.1.0/24');
    for (const ip of ips) {
      expect(cidrContains(subnet, parseIpv4(ip))).toBe(true);
      // The five AWS-reserved addresses are never handed out.
      expect(['10.0.1.0', '10.0.1.1', '10.0.1.2', '10.0.1.3', '10.0.1.255']).not.toContain(ip);
    }
    expect(await freeCount()).toBe(before - 5);
  });

  it('takes explicit addresses, with the one marked primary first', async () => {
    const eniId = await createEni({
      PrivateIpAddresses: [
        { PrivateIpAddress: '10.0.1.20', Primary: false },
        { PrivateIpAddress: '10.0.1.21', Primary: true },
      ],
    });
    const eni = await describeEni(eniId);
    expect(eni.PrivateIpAddress).toBe('10.0.1.21');
    expect(eni.PrivateIpAddresses?.map((p) => p.PrivateIpAddress)).toEqual(['10.0.1.21', '10.0.1.20']);
    expect(await errorCode(createEni({ PrivateIpAddress: '10.0.1.20' }))).toBe('InvalidIPAddress.InUse');
    expect(await errorCode(createEni({ PrivateIpAddress: '10.0.1.2' }))).toBe('InvalidParameterValue');
    expect(await errorCode(createEni({ PrivateIpAddress: '10.0.2.9' }))).toBe('InvalidParameterValue');
  });

  it('delegates aligned /28 prefixes that take 16 addresses each from the subnet', async () => {
    const before = await freeCount();
    const eniId = await createEni({ Ipv4PrefixCount: 2 });
    const eni = await describeEni(eniId);
    const prefixes = eni.Ipv4Prefixes?.map((p) => p.Ipv4Prefix as string) ?? [];
    expect(prefixes).toHaveLength(2);
    for (const prefix of prefixes) {
      expect(prefix).toMatch(/\/28$/);
      expect(parseCidr(prefix).network % 16).toBe(0);
      for (const ip of addressesOf(prefix))
        expect(eni.PrivateIpAddresses?.map((p) => p.PrivateIpAddress)).not.toContain(ip);
    }
    expect(await freeCount()).toBe(before - 1 - 32);
    const assigned = await h.ec2.send(
      new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: eniId, Ipv4PrefixCount: 1 }),
    );
    expect(assigned.AssignedIpv4Prefixes).toHaveLength(1);
    const third = assigned.AssignedIpv4Prefixes?.[0]?.Ipv4Prefix as string;
    expect(prefixes).not.toContain(third);
    await h.ec2.send(new UnassignPrivateIpAddressesCommand({ NetworkInterfaceId: eniId, Ipv4Prefixes: [third] }));
    expect(await freeCount()).toBe(before - 1 - 32);
  });

  it('answers InsufficientFreeAddressesInSubnet and takes nothing when the subnet runs short', async () => {
    const small = await h.ec2.send(new CreateSubnetCommand({ VpcId: h.vpcId, CidrBlock: '10.0.9.0/28' }));
    const subnetId = small.Subnet?.SubnetId as string;
    // A /28 has 16 addresses, 5 reserved by AWS.
    expect(small.Subnet?.AvailableIpAddressCount).toBe(11);
    await h.ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: subnetId, SecondaryPrivateIpAddressCount: 7 }));
    expect(await freeCount(subnetId)).toBe(3);
    const code = await errorCode(
      h.ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: subnetId, SecondaryPrivateIpAddressCount: 3 })),
    );
    expect(code).toBe('InsufficientFreeAddressesInSubnet');
    expect(await freeCount(subnetId)).toBe(3);
    // No aligned /28 can ever fit in a /28 that has reserved addresses.
    expect(
      await errorCode(h.ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: subnetId, Ipv4PrefixCount: 1 }))),
    ).toBe('InsufficientFreeAddressesInSubnet');
    await h.ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: subnetId, SecondaryPrivateIpAddressCount: 2 }));
    expect(await freeCount(subnetId)).toBe(0);
  });

  it('returns the same ENI for a repeated ClientToken and rejects the token with other parameters', async () => {
    const first = await h.ec2.send(
      new CreateNetworkInterfaceCommand({
        SubnetId: h.subnetId,
        ClientToken: 'tok-1',
        SecondaryPrivateIpAddressCount: 2,
      }),
    );
    const free = await freeCount();
    const again = await h.ec2.send(
      new CreateNetworkInterfaceCommand({
        SubnetId: h.subnetId,
        ClientToken: 'tok-1',
        SecondaryPrivateIpAddressCount: 2,
      }),
    );
    expect(again.NetworkInterface?.NetworkInterfaceId).toBe(first.NetworkInterface?.NetworkInterfaceId);
    expect(await freeCount()).toBe(free);
    const all = await h.ec2.send(
      new DescribeNetworkInterfacesCommand({ Filters: [{ Name: 'subnet-id', Values: [h.subnetId] }] }),
    );
    expect(all.NetworkInterfaces).toHaveLength(1);
    expect(
      await errorCode(
        h.ec2.send(
          new CreateNetworkInterfaceCommand({
            SubnetId: h.subnetId,
            ClientToken: 'tok-1',
            SecondaryPrivateIpAddressCount: 3,
          }),
        ),
      ),
    ).toBe('IdempotentParameterMismatch');
  });

  it('assigns explicit addresses, moves them only with AllowReassignment, and unassigns', async () => {
    const a = await createEni({ SecondaryPrivateIpAddressCount: 1 });
    const b = await createEni();
    await h.ec2.send(
      new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: a, PrivateIpAddresses: ['10.0.1.100'] }),
    );
    expect(
      await errorCode(
        h.ec2.send(new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: b, PrivateIpAddresses: ['10.0.1.100'] })),
      ),
    ).toBe('InvalidIPAddress.InUse');
    await h.ec2.send(
      new AssignPrivateIpAddressesCommand({
        NetworkInterfaceId: b,
        PrivateIpAddresses: ['10.0.1.100'],
        AllowReassignment: true,
      }),
    );
    expect((await describeEni(a)).PrivateIpAddresses?.map((p) => p.PrivateIpAddress)).not.toContain('10.0.1.100');
    expect((await describeEni(b)).PrivateIpAddresses?.map((p) => p.PrivateIpAddress)).toContain('10.0.1.100');
    const primary = (await describeEni(b)).PrivateIpAddress as string;
    expect(
      await errorCode(
        h.ec2.send(new UnassignPrivateIpAddressesCommand({ NetworkInterfaceId: b, PrivateIpAddresses: [primary] })),
      ),
    ).toBe('InvalidParameterValue');
    expect(
      await errorCode(
        h.ec2.send(
          new UnassignPrivateIpAddressesCommand({ NetworkInterfaceId: b, PrivateIpAddresses: ['10.0.1.101'] }),
        ),
      ),
    ).toBe('InvalidParameterValue');
    const free = await freeCount();
    await h.ec2.send(
      new UnassignPrivateIpAddressesCommand({ NetworkInterfaceId: b, PrivateIpAddresses: ['10.0.1.100'] }),
    );
    expect(await freeCount()).toBe(free + 1);
    expect((await describeEni(b)).PrivateIpAddresses).toHaveLength(1);
  });

  it('hides a new ENI from Describe-by-id for the eventual-consistency window', async () => {
    let nowMs = Date.UTC(2026, 0, 1);
    const other = await startHarness({ clock: () => nowMs, timeScale: 0.01, delays: { eventualConsistencyMs: 3000 } });
    try {
      const out = await other.ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: other.subnetId }));
      const eniId = out.NetworkInterface?.NetworkInterfaceId as string;
      const byId = () => other.ec2.send(new DescribeNetworkInterfacesCommand({ NetworkInterfaceIds: [eniId] }));
      expect(await errorCode(byId())).toBe('InvalidNetworkInterfaceID.NotFound');
      const filtered = await other.ec2.send(
        new DescribeNetworkInterfacesCommand({ Filters: [{ Name: 'subnet-id', Values: [other.subnetId] }] }),
      );
      expect(filtered.NetworkInterfaces?.map((e) => e.NetworkInterfaceId)).not.toContain(eniId);
      // 3000 AWS ms at timeScale 0.01 is 30 real ms: still hidden at 29, visible at 30.
      nowMs += 29;
      expect(await errorCode(byId())).toBe('InvalidNetworkInterfaceID.NotFound');
      nowMs += 1;
      expect((await byId()).NetworkInterfaces?.[0]?.NetworkInterfaceId).toBe(eniId);
    } finally {
      await other.close();
    }
  });

  it('with the consistency scope `all`, also refuses mutating calls on a too-new ENI', async () => {
    let nowMs = Date.UTC(2026, 0, 1);
    const other = await startHarness({
      clock: () => nowMs,
      timeScale: 0.01,
      delays: { eventualConsistencyMs: 2000, instancePendingMs: 0 },
      eventualConsistencyScope: 'all',
    });
    try {
      const instanceId = other.sim.api.launchInstance({
        instanceType: 'm5.large',
        subnetId: other.subnetId,
      }).instanceId;
      nowMs += 20;
      const out = await other.ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: other.subnetId }));
      const eniId = out.NetworkInterface?.NetworkInterfaceId as string;
      const attach = () =>
        other.ec2.send(
          new AttachNetworkInterfaceCommand({ NetworkInterfaceId: eniId, InstanceId: instanceId, DeviceIndex: 1 }),
        );
      expect(await errorCode(attach())).toBe('InvalidNetworkInterfaceID.NotFound');
      expect(await errorCode(other.ec2.send(new DeleteNetworkInterfaceCommand({ NetworkInterfaceId: eniId })))).toBe(
        'InvalidNetworkInterfaceID.NotFound',
      );
      nowMs += 20;
      expect((await attach()).AttachmentId).toMatch(/^eni-attach-/);
      other.sim.admin.setEventualConsistencyScope('describe');
    } finally {
      await other.close();
    }
  });

  it('keeps subnet accounting exact under 40 concurrent creates', async () => {
    const before = await freeCount();
    const results = await Promise.allSettled(
      Array.from({ length: 40 }, () =>
        h.ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: h.subnetId, SecondaryPrivateIpAddressCount: 6 })),
      ),
    );
    const created = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value.NetworkInterface] : []));
    const failed = results.flatMap((r) => (r.status === 'rejected' ? [(r.reason as Error).name] : []));
    // 251 free / 7 per ENI: 35 fit, the rest must fail with the subnet error, not corrupt the count.
    expect(created).toHaveLength(Math.floor(before / 7));
    expect(new Set(failed)).toEqual(new Set(['InsufficientFreeAddressesInSubnet']));
    const all = created.flatMap((e) => e?.PrivateIpAddresses?.map((p) => p.PrivateIpAddress) ?? []);
    expect(new Set(all).size).toBe(all.length);
    expect(await freeCount()).toBe(before - all.length);
  });
});
