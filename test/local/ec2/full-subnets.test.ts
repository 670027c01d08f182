import {
  AssignPrivateIpAddressesCommand,
  CreateNetworkInterfaceCommand,
  CreateSubnetCommand,
  DescribeNetworkInterfacesCommand,
} from '@aws-sdk/client-ec2';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { addressesOf } from '../../../shared/ipv4.js';
import { type Ec2Harness, errorCode, startHarness, subnetFreeCount } from './harness.js';

/**
 * Full subnets as EC2 answers them, through the real EC2Client: the five reserved addresses, an exhausted
 * subnet (`InsufficientFreeAddressesInSubnet`) and a fragmented one (`InsufficientCidrBlocks`: addresses left,
 * no aligned /28), each refused request leaving the subnet as it was.
 */
let h: Ec2Harness;

const FULL = {
  code: 'InsufficientFreeAddressesInSubnet',
  message: 'The specified subnet does not have enough free addresses to satisfy the request.',
};
const FRAGMENTED = {
  code: 'InsufficientCidrBlocks',
  message: 'The specified subnet does not have enough free cidr blocks to satisfy the request.',
};

/** The error as the SDK surfaces it: code, message and HTTP status. */
async function refusal(call: Promise<unknown>): Promise<{ code: string; message: string; status?: number }> {
  try {
    await call;
  } catch (err) {
    const e = err as { name: string; message: string; $metadata?: { httpStatusCode?: number } };
    return { code: e.name, message: e.message, status: e.$metadata?.httpStatusCode };
  }
  throw new Error('expected the call to fail');
}

async function subnet(cidr: string): Promise<string> {
  const out = await h.ec2.send(new CreateSubnetCommand({ VpcId: h.vpcId, CidrBlock: cidr }));
  return out.Subnet?.SubnetId as string;
}

async function eniAddresses(eniId: string): Promise<{ ips: string[]; prefixes: string[] }> {
  const out = await h.ec2.send(new DescribeNetworkInterfacesCommand({ NetworkInterfaceIds: [eniId] }));
  const eni = out.NetworkInterfaces?.[0];
  return {
    ips: (eni?.PrivateIpAddresses ?? []).map((a) => a.PrivateIpAddress as string),
    prefixes: (eni?.Ipv4Prefixes ?? []).map((p) => p.Ipv4Prefix as string),
  };
}

describe('EC2 simulator: full subnets', () => {
  beforeEach(async () => {
    h = await startHarness({ seed: 25 });
  });
  afterEach(async () => {
    await h.close();
  });

  it('keeps the first four and the last address of a subnet out of every answer', async () => {
    const subnetId = await subnet('10.0.9.0/28');
    expect(await subnetFreeCount(h, subnetId)).toBe(11);
    const eni = await h.ec2.send(
      new CreateNetworkInterfaceCommand({ SubnetId: subnetId, SecondaryPrivateIpAddressCount: 10 }),
    );
    const { ips } = await eniAddresses(eni.NetworkInterface?.NetworkInterfaceId as string);
    expect(new Set(ips)).toEqual(new Set(addressesOf('10.0.9.0/28').slice(4, 15)));
    expect(await subnetFreeCount(h, subnetId)).toBe(0);
    // Asking for a reserved address by name is refused too, whatever else is free.
    const other = await subnet('10.0.10.0/28');
    for (const reserved of ['10.0.10.0', '10.0.10.3', '10.0.10.15']) {
      expect(
        await errorCode(h.ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: other, PrivateIpAddress: reserved }))),
      ).toBe('InvalidParameterValue');
    }
    expect(await subnetFreeCount(h, other)).toBe(11);
  });

  it('answers InsufficientFreeAddressesInSubnet (400) to Create and Assign once the subnet is full', async () => {
    const subnetId = await subnet('10.0.9.0/28');
    const eni = await h.ec2.send(
      new CreateNetworkInterfaceCommand({ SubnetId: subnetId, SecondaryPrivateIpAddressCount: 9 }),
    );
    const eniId = eni.NetworkInterface?.NetworkInterfaceId as string;
    expect(await subnetFreeCount(h, subnetId)).toBe(1);
    // Two wanted, one free: all or nothing.
    expect(
      await refusal(
        h.ec2.send(
          new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: eniId, SecondaryPrivateIpAddressCount: 2 }),
        ),
      ),
    ).toEqual({ ...FULL, status: 400 });
    expect((await eniAddresses(eniId)).ips).toHaveLength(10);
    expect(await subnetFreeCount(h, subnetId)).toBe(1);
    await h.ec2.send(
      new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: eniId, SecondaryPrivateIpAddressCount: 1 }),
    );
    expect(await subnetFreeCount(h, subnetId)).toBe(0);
    expect(await refusal(h.ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: subnetId })))).toEqual({
      ...FULL,
      status: 400,
    });
    expect(await subnetFreeCount(h, subnetId)).toBe(0);
  });

  it('hands out only aligned /28s that hold no reserved address', async () => {
    // A /26 has four aligned /28s; the first holds .0–.3 and the last .63, so two are delegable.
    const subnetId = await subnet('10.0.2.0/26');
    const eni = await h.ec2.send(
      new CreateNetworkInterfaceCommand({ SubnetId: subnetId, PrivateIpAddress: '10.0.2.5', Ipv4PrefixCount: 2 }),
    );
    const { prefixes } = await eniAddresses(eni.NetworkInterface?.NetworkInterfaceId as string);
    expect(new Set(prefixes)).toEqual(new Set(['10.0.2.16/28', '10.0.2.32/28']));
    expect(await subnetFreeCount(h, subnetId)).toBe(59 - 1 - 32);
  });

  it('answers InsufficientCidrBlocks (400) to prefix requests in a fragmented subnet while addresses remain', async () => {
    const subnetId = await subnet('10.0.2.0/26');
    // One address in each delegable /28: 57 addresses free, no aligned block.
    const first = await h.ec2.send(
      new CreateNetworkInterfaceCommand({ SubnetId: subnetId, PrivateIpAddress: '10.0.2.20' }),
    );
    await h.ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: subnetId, PrivateIpAddress: '10.0.2.40' }));
    const eniId = first.NetworkInterface?.NetworkInterfaceId as string;
    expect(await subnetFreeCount(h, subnetId)).toBe(57);

    expect(
      await refusal(h.ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: subnetId, Ipv4PrefixCount: 1 }))),
    ).toEqual({ ...FRAGMENTED, status: 400 });
    expect(
      await refusal(h.ec2.send(new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: eniId, Ipv4PrefixCount: 1 }))),
    ).toEqual({ ...FRAGMENTED, status: 400 });
    // Nothing was taken by the refused requests (the create's primary address included).
    expect(await subnetFreeCount(h, subnetId)).toBe(57);
    expect(await eniAddresses(eniId)).toEqual({ ips: ['10.0.2.20'], prefixes: [] });

    // Single addresses are still there: what a fallback from prefixes relies on.
    await h.ec2.send(
      new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: eniId, SecondaryPrivateIpAddressCount: 9 }),
    );
    expect(await subnetFreeCount(h, subnetId)).toBe(48);
  });

  it('answers InsufficientFreeAddressesInSubnet to a prefix request when even the addresses are short', async () => {
    const subnetId = await subnet('10.0.2.0/27');
    // 27 free; 13 taken leaves 14, fewer than one /28 needs.
    await h.ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: subnetId, SecondaryPrivateIpAddressCount: 12 }));
    expect(await subnetFreeCount(h, subnetId)).toBe(14);
    expect(
      await refusal(h.ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: subnetId, Ipv4PrefixCount: 1 }))),
    ).toEqual({ ...FULL, status: 400 });
    expect(await subnetFreeCount(h, subnetId)).toBe(14);
  });
});
