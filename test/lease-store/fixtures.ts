import { randomBytes } from 'node:crypto';
import type { LeaseHolder, NewLease } from '../../shared/domain/lease.js';
import type { NodeRecord } from '../../shared/domain/node.js';

/** Factories for the lease-store suites: valid by default, every field overridable. */
export function newInstanceArn(): string {
  return `arn:aws:ec2:eu-west-1:123456789012:instance/i-${randomBytes(9).toString('hex').slice(0, 17)}`;
}

export function newLeases(instanceArn: string, count: number, overrides: Partial<NewLease> = {}): NewLease[] {
  return Array.from({ length: count }, (_, i) => ({
    instanceArn,
    ip: `10.0.${1 + Math.floor(i / 250)}.${10 + (i % 250)}`,
    eniId: 'eni-0123456789abcdef0',
    deviceIndex: 1,
    mac: '02:00:00:00:00:01',
    subnetId: 'subnet-0123456789abcdef0',
    subnetCidr: '10.0.0.0/16',
    gateway: '10.0.0.1',
    ...overrides,
  }));
}

export function holder(n: number | string, overrides: Partial<LeaseHolder> = {}): LeaseHolder {
  return {
    containerId: `container-${n}`,
    ifName: 'eth0',
    netns: `/var/run/netns/cni-${n}`,
    podNamespace: 'default',
    podName: `pod-${n}`,
    ...overrides,
  };
}

export function nodeRecord(instanceArn: string, overrides: Partial<NodeRecord> = {}): NodeRecord {
  const instanceId = instanceArn.slice(instanceArn.lastIndexOf('/') + 1);
  return {
    instanceArn,
    instanceId,
    instanceType: 'm5.large',
    availabilityZone: 'eu-west-1a',
    lifecycle: { autoScalingGroupName: 'asg-1', hookName: 'launch', token: 'tok-1' },
    limits: {
      instanceType: 'm5.large',
      maxEnis: 3,
      ipv4PerEni: 10,
      defaultNetworkCardIndex: 0,
      networkCards: [{ networkCardIndex: 0, maxEnis: 3 }],
      hypervisor: 'nitro',
      bareMetal: false,
    },
    podSubnetIds: ['subnet-0123456789abcdef0'],
    phase: 'PENDING',
    enis: [
      {
        deviceIndex: 1,
        networkCardIndex: 0,
        subnetId: 'subnet-0123456789abcdef0',
        clientToken: `${instanceId}-1`,
        step: 'PLANNED',
        addresses: [],
        prefixes: [],
      },
    ],
    maxPods: 29,
    createdAtMs: 1_767_225_600_000,
    updatedAtMs: 1_767_225_600_000,
    version: 1,
    ...overrides,
  };
}
