import { Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import { AwsSolutionsChecks } from 'cdk-nag';
import { describe, expect, it } from 'vitest';
import { AllocatorPropsError, podEniLaunchTemplateData } from '../../infra/construct/index.js';
import type { VpcLeaseAllocatorProps } from '../../infra/construct/props.js';
import { buildAllocator } from './support/stacks.js';

/** An allocator and, in the same stack, the node group's launch template carrying its pod ENIs. */
function nodeTemplate(
  allocatorProps: Partial<VpcLeaseAllocatorProps>,
  options: Partial<Parameters<typeof podEniLaunchTemplateData>[1]> = {},
): { stack: Stack; template: Template } {
  const allocator = buildAllocator({ clusterName: 'prod-1', autoScalingGroups: ['nodes'], ...allocatorProps });
  const stack = Stack.of(allocator);
  const data = podEniLaunchTemplateData(allocator, {
    instanceType: 'm5.large',
    nodeSecurityGroups: ['sg-0123456789abcdef0'],
    ...options,
  });
  new ec2.CfnLaunchTemplate(stack, 'Nodes', {
    launchTemplateData: {
      instanceType: 'm5.large',
      imageId: 'ami-0123456789abcdef0',
      metadataOptions: { httpTokens: 'required' },
      networkInterfaces: data.networkInterfaces,
      tagSpecifications: data.tagSpecifications,
    },
  });
  return { stack, template: Template.fromStack(stack) };
}

describe('Function: podEniLaunchTemplateData', () => {
  it('declares the boot ENI and the planned pod ENIs with secondary addresses, DeleteOnTermination and cluster tags', () => {
    const { template } = nodeTemplate({});
    template.hasResourceProperties('AWS::EC2::LaunchTemplate', {
      LaunchTemplateData: Match.objectLike({
        // m5.large: 10 addresses per ENI, 16 leases wanted (warmHighLeases) → 9 + 7 on device indexes 1 and 2.
        NetworkInterfaces: [
          { DeviceIndex: 0, Groups: ['sg-0123456789abcdef0'], DeleteOnTermination: true },
          Match.objectLike({ DeviceIndex: 1, SecondaryPrivateIpAddressCount: 9, DeleteOnTermination: true }),
          Match.objectLike({ DeviceIndex: 2, SecondaryPrivateIpAddressCount: 7, DeleteOnTermination: true }),
        ],
        TagSpecifications: [
          {
            ResourceType: 'network-interface',
            Tags: [
              { Key: 'vpc-lease:cluster', Value: 'prod-1' },
              { Key: 'vpc-lease:owner', Value: 'launch-template' },
            ],
          },
        ],
      }),
    });
  });

  it('asks for /28 prefixes with prefix delegation, and puts pod ENIs in the pod subnet when one is given', () => {
    const { template } = nodeTemplate(
      { prefixDelegation: true },
      { podSubnet: 'subnet-0123456789abcdef0', podSecurityGroups: ['sg-0fedcba9876543210'] },
    );
    const lt = Object.values(template.findResources('AWS::EC2::LaunchTemplate'))[0] as {
      Properties: { LaunchTemplateData: { NetworkInterfaces: Record<string, unknown>[] } };
    };
    const pods = lt.Properties.LaunchTemplateData.NetworkInterfaces.slice(1);
    expect(pods).toEqual([
      {
        DeviceIndex: 1,
        SubnetId: 'subnet-0123456789abcdef0',
        Ipv4PrefixCount: 1,
        Groups: ['sg-0fedcba9876543210'],
        DeleteOnTermination: true,
        Description: 'vpc-lease prod-1 pod ENI 1',
      },
    ]);
  });

  it('refuses ipFamily ipv6 and dual: a template declares IPv4 only', () => {
    for (const ipFamily of ['ipv6', 'dual'] as const)
      expect(() =>
        podEniLaunchTemplateData(buildAllocator({ ipFamily }), {
          instanceType: 'm5.large',
          nodeSecurityGroups: ['sg-1'],
        }),
      ).toThrow(new RegExp(`launch-template pod ENIs are IPv4 only; ipFamily ${ipFamily}`));
  });

  it('refuses a type the plan cannot serve: prefixes off Nitro, an unknown type, no node security group', () => {
    const allocator = buildAllocator({ prefixDelegation: true });
    expect(() =>
      podEniLaunchTemplateData(allocator, { instanceType: 't2.medium', nodeSecurityGroups: ['sg-1'] }),
    ).toThrow(AllocatorPropsError);
    expect(() =>
      podEniLaunchTemplateData(allocator, { instanceType: 'm5.huge', nodeSecurityGroups: ['sg-1'] }),
    ).toThrow(/unknown instance type m5\.huge/);
    expect(() => podEniLaunchTemplateData(allocator, { instanceType: 'm5.large', nodeSecurityGroups: [] })).toThrow(
      /nodeSecurityGroups/,
    );
  });

  it('leaves cdk-nag (AwsSolutions) with no unacknowledged error on the stack with the launch template', () => {
    const { stack } = nodeTemplate({});
    // The template is synthesised (aspects have run) before the checks read it.
    const report = new AwsSolutionsChecks().validateScope(stack) as unknown as {
      violations: { ruleName: string; severity?: string }[];
    };
    expect(report.violations.filter((v) => v.severity === 'error').map((v) => v.ruleName)).toEqual([]);
  });
});
