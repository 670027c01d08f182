import type { NewLease } from '../../../shared/domain/lease.js';
import type { IpFamilySetting, NodeRecord } from '../../../shared/domain/node.js';
import type { LeaseStore } from '../../../shared/lease-store/port.js';
import { expectedLeases } from '../../../shared/lifecycle/pod-eni.js';
import { SUBNET_CIDR } from './node-fixture.js';

/** The fixture ENI's IPv6 side: its subnet's /64 and the /80 a launch delegates to it. */
export const V6_SUBNET_CIDR = '2600:1f18:77:1::/64';
export const V6_PREFIX = '2600:1f18:77:1:1::/80';

export interface LaunchedNode {
  readonly instanceArn: string;
  readonly instanceId: string;
  /** The pod ENI: its id and the MAC of the host link that stands in for it. */
  readonly eniId: string;
  readonly mac: string;
}

/**
 * What a launch of `ipFamily` writes for a node with one pod ENI (device index 1) in the fixture subnets: the node
 * item with its family (`ipf`) and the FREE leases expectedLeases (shared/lifecycle/pod-eni.ts) derives from it —
 * `count` pods, IPv4 from 10.77.0.`fromV4` upwards, IPv6 inside the ENI's /80, both for `dual`.
 */
export async function writeLaunchLeases(
  store: LeaseStore,
  node: LaunchedNode,
  ipFamily: IpFamilySetting,
  count: number,
  fromV4 = 10,
): Promise<NewLease[]> {
  const nowMs = Date.now() - 1000;
  const record: NodeRecord = {
    instanceArn: node.instanceArn,
    instanceId: node.instanceId,
    instanceType: 'm5.large',
    availabilityZone: 'us-east-1a',
    podSubnetIds: ['subnet-0077aa77'],
    phase: 'READY',
    ipFamily,
    enis: [
      {
        deviceIndex: 1,
        networkCardIndex: 0,
        subnetId: 'subnet-0077aa77',
        clientToken: `${node.instanceId}-1`,
        step: 'LEASED',
        eniId: node.eniId,
        mac: node.mac,
        subnetCidr: SUBNET_CIDR,
        addresses: ipFamily === 'ipv6' ? [] : Array.from({ length: count }, (_, i) => `10.77.0.${fromV4 + i}`),
        prefixes: [],
        ...(ipFamily === 'ipv4' ? {} : { ipv6Prefixes: [V6_PREFIX], ipv6SubnetCidr: V6_SUBNET_CIDR }),
      },
    ],
    maxPods: count,
    createdAtMs: nowMs,
    updatedAtMs: nowMs,
    version: 1,
  };
  const leases = expectedLeases(record, count);
  await store.createNode(record);
  await store.putLeases(leases, nowMs);
  return leases;
}
