import {
  AssignPrivateIpAddressesCommand,
  CreateNetworkInterfaceCommand,
  CreateSubnetCommand,
  DescribeSubnetsCommand,
  EC2Client,
} from '@aws-sdk/client-ec2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CliFixture } from './support.js';

interface Row {
  subnetId: string;
  cidr: string;
  availableIpCount: number;
  freePrefixBlocks: number;
  enis: number;
  clusterEnis: number;
  lastRefusal?: { code: string; instanceId: string };
}

/**
 * `vpc-lease subnets` against the local cloud: EC2's free-address count and the free aligned /28s counted
 * from the ENIs in each subnet, on a subnet laid out by hand so the /28 count is known without the CLI.
 */
describe('vpc-lease subnets', () => {
  let f: CliFixture;
  let ec2: EC2Client;
  beforeAll(async () => {
    f = await CliFixture.start(1);
    ec2 = new EC2Client({
      region: f.cloud.region,
      endpoint: f.cloud.endpoints.ec2,
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
  }, 180_000);
  afterAll(async () => {
    ec2?.destroy();
    await f?.close();
  });

  const rows = async (...argv: string[]): Promise<Row[]> => {
    const run = await f.cli('--local', '--json', 'subnets', ...argv);
    expect(run.code, run.err).toBe(0);
    return run.json as Row[];
  };

  it("lists the subnets of the cluster's nodes with EC2's free-address count", async () => {
    const node = (await f.store.listNodes())[0]!;
    const listed = await rows();
    const podSubnet = node.enis[0]!.subnetId;
    const row = listed.find((r) => r.subnetId === podSubnet);
    const described = await ec2.send(new DescribeSubnetsCommand({ SubnetIds: [podSubnet] }));
    expect(row?.availableIpCount).toBe(described.Subnets?.[0]?.AvailableIpAddressCount);
    expect(row?.clusterEnis).toBe(node.enis.length);
    const text = await f.cli('--local', 'subnets');
    expect(text.out.split('\n')[0]).toMatch(/^SUBNET\s+AZ\s+CIDR\s+FREE-ADDRESSES\s+FREE-\/28/);
  });

  it('counts the aligned /28s that no address or prefix touches, as EC2 would delegate them', async () => {
    const vpcId = f.cloud.network!.vpcId;
    const made = await ec2.send(
      new CreateSubnetCommand({ VpcId: vpcId, CidrBlock: '10.0.200.0/26', AvailabilityZone: `${f.cloud.region}a` }),
    );
    const subnetId = made.Subnet?.SubnetId as string;
    // Of a /26's four /28s, the first holds .0–.3 and the last .63 (reserved): two delegable, both free.
    expect(await rows('--subnet', subnetId)).toEqual([
      expect.objectContaining({ subnetId, availableIpCount: 59, freePrefixBlocks: 2, enis: 0, clusterEnis: 0 }),
    ]);
    // One address in .16/28 leaves one block; a prefix then takes the other, though 42 addresses are free.
    const eni = await ec2.send(
      new CreateNetworkInterfaceCommand({ SubnetId: subnetId, PrivateIpAddress: '10.0.200.20' }),
    );
    expect((await rows('--subnet', subnetId))[0]).toMatchObject({ availableIpCount: 58, freePrefixBlocks: 1, enis: 1 });
    await ec2.send(
      new AssignPrivateIpAddressesCommand({
        NetworkInterfaceId: eni.NetworkInterface?.NetworkInterfaceId,
        Ipv4PrefixCount: 1,
      }),
    );
    expect((await rows('--subnet', subnetId))[0]).toMatchObject({ availableIpCount: 42, freePrefixBlocks: 0 });
  });

  it('shows the last refusal a node item recorded for a subnet, and refuses a bad --subnet', async () => {
    const node = (await f.store.listNodes())[0]!;
    const subnetId = node.enis[0]!.subnetId;
    await f.store.updateNode(
      {
        ...node,
        subnetRefusals: [{ subnetId, code: 'InsufficientCidrBlocks', atMs: Date.now() }],
      },
      node.version,
    );
    const row = (await rows()).find((r) => r.subnetId === subnetId);
    expect(row?.lastRefusal).toMatchObject({ code: 'InsufficientCidrBlocks', instanceId: node.instanceId });
    const nodes = await f.cli('--local', '--json', 'nodes');
    expect((nodes.json as { subnetRefusals?: { code: string }[] }[])[0]?.subnetRefusals?.[0]?.code).toBe(
      'InsufficientCidrBlocks',
    );

    const bad = await f.cli('--local', 'subnets', '--subnet', 'sn-1');
    expect(bad.code).toBe(2);
    expect(bad.err).toContain('--subnet: "sn-1" is not a subnet id');
  });
});
