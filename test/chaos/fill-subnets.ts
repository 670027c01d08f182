import {
  CreateNetworkInterfaceCommand,
  CreateTagsCommand,
  DescribeSubnetsCommand,
  EC2Client,
} from '@aws-sdk/client-ec2';
import { addressesOf } from '../../shared/ipv4.js';
import type { ControlPlaneCloud } from '../bench/control-plane-cloud.js';

/** The pod-subnet tag of the full-subnets family: pod subnets are chosen by tags, as a deployment would. */
export const FILL_POD_TAG = { 'vpc-lease/chaos-pods': 'yes' } as const;

/**
 * The two pod subnets of the full-subnets family, both in the group's AZ: `filled` has the most room, so the
 * planner puts ENIs there first until it is filled mid-run; `spare` has room for every launch of a schedule.
 */
export interface FillSubnets {
  readonly filled: string;
  readonly spare: string;
  readonly az: string;
}

export async function seedFillSubnets(c: ControlPlaneCloud): Promise<FillSubnets> {
  const vpcId = c.cloud.network!.vpcId;
  const az = `${c.cloud.region}a`;
  const filled = c.cloud.ec2.admin.seedSubnet(vpcId, '10.0.96.0/22', az).subnetId;
  const spare = c.cloud.ec2.admin.seedSubnet(vpcId, '10.0.100.0/23', az).subnetId;
  const ec2 = client();
  try {
    await ec2.send(
      new CreateTagsCommand({
        Resources: [filled, spare],
        Tags: Object.entries(FILL_POD_TAG).map(([Key, Value]) => ({ Key, Value })),
      }),
    );
  } finally {
    ec2.destroy();
  }
  return { filled, spare, az };
}

/**
 * Another tenant fills `subnetId` behind the control plane's back: `exhaust` takes every free address, `fragment`
 * one address in each aligned /28, so /28s are refused (InsufficientCidrBlocks) while addresses remain. Calls go
 * through the SDK with its retries, since the schedule's faults and throttling may still be on; a lost response
 * that the SDK repeats only fills the subnet further. Returns the subnet's free addresses afterwards. `given`:
 * a client to use (the pool tests' simulator), else one from AWS_ENDPOINT_URL_EC2.
 */
export async function fillSubnet(subnetId: string, mode: 'exhaust' | 'fragment', given?: EC2Client): Promise<number> {
  const ec2 = given ?? client();
  const available = async () =>
    (await ec2.send(new DescribeSubnetsCommand({ SubnetIds: [subnetId] }))).Subnets?.[0]?.AvailableIpAddressCount ?? 0;
  try {
    const cidr = (await ec2.send(new DescribeSubnetsCommand({ SubnetIds: [subnetId] }))).Subnets?.[0]?.CidrBlock;
    if (mode === 'fragment') {
      const all = addressesOf(cidr as string);
      for (let block = 16; block + 16 < all.length; block += 16)
        await tolerate(
          ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: subnetId, PrivateIpAddress: all[block + 5] })),
        );
      return await available();
    }
    // Bounded: each pass takes up to 50 addresses (an unattached ENI's most) or learns the subnet is full.
    for (let pass = 0; pass < 200; pass += 1) {
      const free = await available();
      if (free === 0) return 0;
      await tolerate(
        ec2.send(
          new CreateNetworkInterfaceCommand({
            SubnetId: subnetId,
            SecondaryPrivateIpAddressCount: Math.min(free - 1, 49),
          }),
        ),
      );
    }
    return await available();
  } finally {
    if (!given) ec2.destroy();
  }
}

/** The control plane's launches race the filler for addresses: a refusal only means the subnet filled. */
async function tolerate(call: Promise<unknown>): Promise<void> {
  try {
    await call;
  } catch (err) {
    const code = (err as { name?: string }).name ?? '';
    if (!['InsufficientFreeAddressesInSubnet', 'InvalidIPAddress.InUse'].includes(code)) throw err;
  }
}

/** The simulator's endpoint comes from AWS_ENDPOINT_URL_EC2, which ControlPlaneCloud sets. */
function client(): EC2Client {
  return new EC2Client({ maxAttempts: 20 });
}
