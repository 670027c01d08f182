import {
  AttachNetworkInterfaceCommand,
  CreateNetworkInterfaceCommand,
  CreateSecurityGroupCommand,
  CreateSubnetCommand,
  CreateTagsCommand,
  CreateVpcCommand,
  DeleteTagsCommand,
  DescribeInstancesCommand,
  DescribeInstanceTypesCommand,
  DescribeNetworkInterfacesCommand,
  DescribeSecurityGroupsCommand,
  DescribeSubnetsCommand,
  DescribeVpcsCommand,
  paginateDescribeNetworkInterfaces,
  RunInstancesCommand,
  TerminateInstancesCommand,
} from '@aws-sdk/client-ec2';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { InstanceStateChange } from '../../../local-cloud/ports.js';
import { type Ec2Harness, errorCode, startHarness, waitFor } from './harness.js';

let h: Ec2Harness;

describe('EC2 simulator: instances, VPCs and Describe', () => {
  beforeEach(async () => {
    h = await startHarness({ timeScale: 0.001 });
  });
  afterEach(async () => {
    await h.close();
  });

  it('launches with a boot ENI at device index 0 and moves pending → running', async () => {
    const changes: InstanceStateChange[] = [];
    h.sim.api.onInstanceStateChange((c) => changes.push(c));
    const run = await h.ec2.send(
      new RunInstancesCommand({
        InstanceType: 'm5.xlarge',
        SubnetId: h.subnetId,
        MinCount: 2,
        MaxCount: 2,
        TagSpecifications: [{ ResourceType: 'instance', Tags: [{ Key: 'Name', Value: 'node' }] }],
      }),
    );
    expect(run.ReservationId).toMatch(/^r-[0-9a-f]{17}$/);
    expect(run.Instances).toHaveLength(2);
    const instance = run.Instances?.[0];
    expect(instance?.InstanceId).toMatch(/^i-[0-9a-f]{17}$/);
    expect(instance?.State?.Name).toBe('pending');
    expect(instance?.Tags).toEqual([{ Key: 'Name', Value: 'node' }]);
    const boot = instance?.NetworkInterfaces?.[0];
    expect(boot?.Attachment?.DeviceIndex).toBe(0);
    expect(boot?.Attachment?.DeleteOnTermination).toBe(true);
    expect(boot?.PrivateIpAddress).toBe(instance?.PrivateIpAddress);
    const id = instance?.InstanceId as string;
    await waitFor(async () => (h.sim.api.getInstance(id)?.state === 'running' ? true : undefined), 'running');
    const described = await h.ec2.send(new DescribeInstancesCommand({ InstanceIds: [id] }));
    expect(described.Reservations?.[0]?.Instances?.[0]?.State).toEqual({ Code: 16, Name: 'running' });
    expect(changes.filter((c) => c.instanceId === id).map((c) => [c.previousState, c.state])).toEqual([
      [undefined, 'pending'],
      ['pending', 'running'],
    ]);
  });

  it('terminates: DeleteOnTermination ENIs are deleted, the others detached and kept', async () => {
    const instanceId = h.sim.api.launchInstance({ instanceType: 'm5.large', subnetId: h.subnetId }).instanceId;
    const keep = await h.ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: h.subnetId }));
    const drop = await h.ec2.send(
      new CreateNetworkInterfaceCommand({ SubnetId: h.subnetId, SecondaryPrivateIpAddressCount: 2 }),
    );
    const keepId = keep.NetworkInterface?.NetworkInterfaceId as string;
    const dropId = drop.NetworkInterface?.NetworkInterfaceId as string;
    await h.ec2.send(
      new AttachNetworkInterfaceCommand({ NetworkInterfaceId: keepId, InstanceId: instanceId, DeviceIndex: 1 }),
    );
    const att = await h.ec2.send(
      new AttachNetworkInterfaceCommand({ NetworkInterfaceId: dropId, InstanceId: instanceId, DeviceIndex: 2 }),
    );
    const { ModifyNetworkInterfaceAttributeCommand } = await import('@aws-sdk/client-ec2');
    await h.ec2.send(
      new ModifyNetworkInterfaceAttributeCommand({
        NetworkInterfaceId: dropId,
        Attachment: { AttachmentId: att.AttachmentId, DeleteOnTermination: true },
      }),
    );
    const bootId = h.sim.api.instanceInterfaces(instanceId)[0]?.eniId as string;
    const subnetBefore = await h.ec2.send(new DescribeSubnetsCommand({ SubnetIds: [h.subnetId] }));
    const out = await h.ec2.send(new TerminateInstancesCommand({ InstanceIds: [instanceId] }));
    expect(out.TerminatingInstances?.[0]?.CurrentState?.Name).toBe('shutting-down');
    await waitFor(
      async () => (h.sim.api.getInstance(instanceId)?.state === 'terminated' ? true : undefined),
      'terminated',
    );
    const left = await h.ec2.send(
      new DescribeNetworkInterfacesCommand({ Filters: [{ Name: 'subnet-id', Values: [h.subnetId] }] }),
    );
    expect(left.NetworkInterfaces?.map((e) => [e.NetworkInterfaceId, e.Status])).toEqual([[keepId, 'available']]);
    expect(left.NetworkInterfaces?.map((e) => e.NetworkInterfaceId)).not.toContain(bootId);
    const subnetAfter = await h.ec2.send(new DescribeSubnetsCommand({ SubnetIds: [h.subnetId] }));
    // Boot ENI (1 address) and the DeleteOnTermination ENI (3 addresses) went back to the subnet.
    expect(subnetAfter.Subnets?.[0]?.AvailableIpAddressCount).toBe(
      (subnetBefore.Subnets?.[0]?.AvailableIpAddressCount ?? 0) + 4,
    );
    expect(h.sim.api.instanceInterfaces(instanceId)).toEqual([]);
    expect(
      await errorCode(
        h.ec2.send(
          new AttachNetworkInterfaceCommand({ NetworkInterfaceId: keepId, InstanceId: instanceId, DeviceIndex: 1 }),
        ),
      ),
    ).toBe('IncorrectInstanceState');
  });

  it('launches once per RunInstances ClientToken', async () => {
    const request = {
      InstanceType: 'm5.large' as const,
      SubnetId: h.subnetId,
      MinCount: 1,
      MaxCount: 1,
      ClientToken: 'asg-1',
    };
    const first = await h.ec2.send(new RunInstancesCommand(request));
    const again = await h.ec2.send(new RunInstancesCommand(request));
    expect(again.Instances?.map((i) => i.InstanceId)).toEqual(first.Instances?.map((i) => i.InstanceId));
    const all = await h.ec2.send(new DescribeInstancesCommand({}));
    expect(all.Reservations?.flatMap((r) => r.Instances ?? [])).toHaveLength(1);
    expect(await errorCode(h.ec2.send(new RunInstancesCommand({ ...request, InstanceType: 'c5.large' })))).toBe(
      'IdempotentParameterMismatch',
    );
  });

  it('rejects unknown instance types and subnets', async () => {
    expect(
      await errorCode(
        h.ec2.send(
          new RunInstancesCommand({ InstanceType: 'x9.huge' as never, SubnetId: h.subnetId, MinCount: 1, MaxCount: 1 }),
        ),
      ),
    ).toBe('InvalidParameterValue');
    expect(
      await errorCode(
        h.ec2.send(
          new RunInstancesCommand({
            InstanceType: 'm5.large',
            SubnetId: 'subnet-00000000000000000',
            MinCount: 1,
            MaxCount: 1,
          }),
        ),
      ),
    ).toBe('InvalidSubnetID.NotFound');
    expect(() => h.sim.api.launchInstance({ instanceType: 'nope', subnetId: h.subnetId })).toThrow(/InstanceType/);
  });

  it('filters instances by type, state, subnet, tag and ENI', async () => {
    const a = h.sim.api.launchInstance({ instanceType: 'm5.large', subnetId: h.subnetId, tags: { role: 'pods' } });
    const b = h.sim.api.launchInstance({ instanceType: 'c5.large', subnetId: h.subnetId });
    h.sim.api.terminateInstance(b.instanceId);
    await waitFor(
      async () => (h.sim.api.getInstance(b.instanceId)?.state === 'terminated' ? true : undefined),
      'terminated',
    );
    const ids = async (filters: { Name: string; Values: string[] }[]): Promise<string[]> => {
      const out = await h.ec2.send(new DescribeInstancesCommand({ Filters: filters }));
      return (out.Reservations ?? []).flatMap((r) => r.Instances?.map((i) => i.InstanceId as string) ?? []).sort();
    };
    expect(await ids([{ Name: 'instance-type', Values: ['m5.*'] }])).toEqual([a.instanceId]);
    expect(await ids([{ Name: 'instance-state-name', Values: ['terminated'] }])).toEqual([b.instanceId]);
    expect(await ids([{ Name: 'tag:role', Values: ['pods'] }])).toEqual([a.instanceId]);
    expect(await ids([{ Name: 'tag-key', Values: ['role'] }])).toEqual([a.instanceId]);
    expect(
      await ids([
        { Name: 'subnet-id', Values: [h.subnetId] },
        { Name: 'availability-zone', Values: ['us-east-1a'] },
      ]),
    ).toEqual([a.instanceId, b.instanceId].sort());
    const bootEni = h.sim.api.instanceInterfaces(a.instanceId)[0]?.eniId as string;
    expect(await ids([{ Name: 'network-interface.network-interface-id', Values: [bootEni] }])).toEqual([a.instanceId]);
    expect(
      await errorCode(
        h.ec2.send(new DescribeInstancesCommand({ Filters: [{ Name: 'no-such-filter', Values: ['x'] }] })),
      ),
    ).toBe('InvalidParameterValue');
    expect(await errorCode(h.ec2.send(new DescribeInstancesCommand({ InstanceIds: ['i-0000000000000000a'] })))).toBe(
      'InvalidInstanceID.NotFound',
    );
  });

  it('filters ENIs by tag, attachment and status, and paginates with MaxResults/NextToken', async () => {
    const instanceId = h.sim.api.launchInstance({ instanceType: 'm5.4xlarge', subnetId: h.subnetId }).instanceId;
    const created: string[] = [];
    for (let i = 0; i < 12; i++) {
      const out = await h.ec2.send(
        new CreateNetworkInterfaceCommand({
          SubnetId: h.subnetId,
          TagSpecifications: [
            { ResourceType: 'network-interface', Tags: [{ Key: 'owner', Value: i % 2 ? 'odd' : 'even' }] },
          ],
        }),
      );
      created.push(out.NetworkInterface?.NetworkInterfaceId as string);
    }
    await h.ec2.send(
      new AttachNetworkInterfaceCommand({ NetworkInterfaceId: created[0], InstanceId: instanceId, DeviceIndex: 1 }),
    );
    const pages: string[][] = [];
    for await (const page of paginateDescribeNetworkInterfaces(
      { client: h.ec2, pageSize: 5 },
      { Filters: [{ Name: 'tag-key', Values: ['owner'] }] },
    )) {
      pages.push(page.NetworkInterfaces?.map((e) => e.NetworkInterfaceId as string) ?? []);
    }
    expect(pages.map((p) => p.length)).toEqual([5, 5, 2]);
    expect(pages.flat()).toEqual(created);
    const odd = await h.ec2.send(
      new DescribeNetworkInterfacesCommand({ Filters: [{ Name: 'tag:owner', Values: ['odd'] }] }),
    );
    expect(odd.NetworkInterfaces?.map((e) => e.NetworkInterfaceId)).toEqual(created.filter((_, i) => i % 2));
    const onInstance = await h.ec2.send(
      new DescribeNetworkInterfacesCommand({
        Filters: [
          { Name: 'attachment.instance-id', Values: [instanceId] },
          { Name: 'attachment.status', Values: ['attaching', 'attached'] },
        ],
      }),
    );
    expect(onInstance.NetworkInterfaces?.map((e) => e.Attachment?.DeviceIndex).sort()).toEqual([0, 1]);
    const available = await h.ec2.send(
      new DescribeNetworkInterfacesCommand({
        Filters: [
          { Name: 'status', Values: ['available'] },
          { Name: 'tag:owner', Values: ['*'] },
        ],
      }),
    );
    expect(available.NetworkInterfaces).toHaveLength(11);
    expect(
      await errorCode(
        h.ec2.send(new DescribeNetworkInterfacesCommand({ NextToken: 'bm90LWEtdG9rZW4', MaxResults: 5 })),
      ),
    ).toBe('InvalidPaginationToken');
    expect(await errorCode(h.ec2.send(new DescribeNetworkInterfacesCommand({ MaxResults: 2 })))).toBe(
      'InvalidParameterValue',
    );
  });

  it('creates and describes VPCs, subnets and security groups with their rules', async () => {
    const vpc = await h.ec2.send(new CreateVpcCommand({ CidrBlock: '172.16.0.0/16' }));
    const vpcId = vpc.Vpc?.VpcId as string;
    expect(vpcId).toMatch(/^vpc-[0-9a-f]{17}$/);
    const subnet = await h.ec2.send(
      new CreateSubnetCommand({ VpcId: vpcId, CidrBlock: '172.16.4.0/22', AvailabilityZone: 'us-east-1b' }),
    );
    expect(subnet.Subnet?.AvailableIpAddressCount).toBe(1024 - 5);
    expect(subnet.Subnet?.AvailabilityZone).toBe('us-east-1b');
    expect(await errorCode(h.ec2.send(new CreateSubnetCommand({ VpcId: vpcId, CidrBlock: '172.16.5.0/24' })))).toBe(
      'InvalidSubnet.Conflict',
    );
    expect(await errorCode(h.ec2.send(new CreateSubnetCommand({ VpcId: vpcId, CidrBlock: '10.9.0.0/24' })))).toBe(
      'InvalidSubnet.Range',
    );
    const sg = await h.ec2.send(new CreateSecurityGroupCommand({ GroupName: 'g', Description: 'd', VpcId: vpcId }));
    expect(sg.GroupId).toMatch(/^sg-[0-9a-f]{17}$/);
    expect(
      await errorCode(h.ec2.send(new CreateSecurityGroupCommand({ GroupName: 'g', Description: 'd', VpcId: vpcId }))),
    ).toBe('InvalidGroup.Duplicate');
    const vpcs = await h.ec2.send(
      new DescribeVpcsCommand({ Filters: [{ Name: 'cidr-block', Values: ['172.16.0.0/16'] }] }),
    );
    expect(vpcs.Vpcs?.map((v) => v.VpcId)).toEqual([vpcId]);
    const subnets = await h.ec2.send(new DescribeSubnetsCommand({ Filters: [{ Name: 'vpc-id', Values: [vpcId] }] }));
    expect(subnets.Subnets?.map((s) => s.CidrBlock)).toEqual(['172.16.4.0/22']);
    const groups = await h.ec2.send(
      new DescribeSecurityGroupsCommand({ Filters: [{ Name: 'vpc-id', Values: [vpcId] }] }),
    );
    expect(groups.SecurityGroups?.map((g) => [g.GroupId, g.GroupName])).toEqual([[sg.GroupId, 'g']]);
    // A security group of another VPC cannot go on an ENI of this one.
    expect(
      await errorCode(
        h.ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: h.subnetId, Groups: [sg.GroupId as string] })),
      ),
    ).toBe('InvalidParameter');
  });

  it('creates and deletes tags on any resource, all or nothing', async () => {
    const eni = await h.ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: h.subnetId }));
    const eniId = eni.NetworkInterface?.NetworkInterfaceId as string;
    await h.ec2.send(
      new CreateTagsCommand({
        Resources: [eniId, h.subnetId, h.vpcId],
        Tags: [
          { Key: 'a', Value: '1' },
          { Key: 'b', Value: '2' },
        ],
      }),
    );
    const tagged = await h.ec2.send(
      new DescribeNetworkInterfacesCommand({ Filters: [{ Name: 'tag:a', Values: ['1'] }] }),
    );
    expect(tagged.NetworkInterfaces?.[0]?.TagSet).toEqual([
      { Key: 'a', Value: '1' },
      { Key: 'b', Value: '2' },
    ]);
    const subnets = await h.ec2.send(new DescribeSubnetsCommand({ Filters: [{ Name: 'tag:b', Values: ['2'] }] }));
    expect(subnets.Subnets?.map((s) => s.SubnetId)).toEqual([h.subnetId]);
    expect(
      await errorCode(
        h.ec2.send(
          new CreateTagsCommand({ Resources: [eniId, 'eni-00000000000000000'], Tags: [{ Key: 'c', Value: '3' }] }),
        ),
      ),
    ).toBe('InvalidNetworkInterfaceID.NotFound');
    await h.ec2.send(new DeleteTagsCommand({ Resources: [eniId], Tags: [{ Key: 'a', Value: 'other' }, { Key: 'b' }] }));
    const after = await h.ec2.send(new DescribeNetworkInterfacesCommand({ NetworkInterfaceIds: [eniId] }));
    // `a` kept (value did not match), `b` removed, `c` never applied.
    expect(after.NetworkInterfaces?.[0]?.TagSet).toEqual([{ Key: 'a', Value: '1' }]);
  });

  it('describes instance types with the limits of the data table', async () => {
    const out = await h.ec2.send(new DescribeInstanceTypesCommand({ InstanceTypes: ['t3.small', 'm5.large'] }));
    const byType = Object.fromEntries((out.InstanceTypes ?? []).map((t) => [t.InstanceType, t.NetworkInfo]));
    expect(byType['t3.small']?.MaximumNetworkInterfaces).toBe(3);
    expect(byType['t3.small']?.Ipv4AddressesPerInterface).toBe(4);
    expect(byType['m5.large']?.MaximumNetworkInterfaces).toBe(3);
    expect(byType['m5.large']?.Ipv4AddressesPerInterface).toBe(10);
    expect(byType['m5.large']?.NetworkCards).toEqual([{ NetworkCardIndex: 0, MaximumNetworkInterfaces: 3 }]);
    expect(await errorCode(h.ec2.send(new DescribeInstanceTypesCommand({ InstanceTypes: ['x9.huge' as never] })))).toBe(
      'InvalidInstanceType',
    );
    const page = await h.ec2.send(new DescribeInstanceTypesCommand({ MaxResults: 20 }));
    expect(page.InstanceTypes).toHaveLength(20);
    expect(page.NextToken).toBeDefined();
  });
});
