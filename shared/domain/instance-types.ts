import type { InstanceLimits } from './limits.js';

/** One entry of shared/data/ec2-instance-types.json (DescribeInstanceTypes NetworkInfo). */
export interface RawInstanceType {
  readonly maximumNetworkInterfaces: number;
  readonly ipv4AddressesPerInterface: number;
  readonly defaultNetworkCardIndex?: number;
  readonly networkCards?: readonly { networkCardIndex: number; maximumNetworkInterfaces: number }[];
  readonly hypervisor?: string;
  readonly bareMetal?: boolean;
}

export interface InstanceTypeTable {
  readonly instanceTypes: Readonly<Record<string, RawInstanceType>>;
}

/** The limits of every type in the shipped table, in the shape the planners take. */
export function instanceLimitsTable(table: InstanceTypeTable): Map<string, InstanceLimits> {
  const out = new Map<string, InstanceLimits>();
  for (const [instanceType, t] of Object.entries(table.instanceTypes)) {
    const cards = t.networkCards?.length
      ? t.networkCards.map((c) => ({ networkCardIndex: c.networkCardIndex, maxEnis: c.maximumNetworkInterfaces }))
      : [{ networkCardIndex: t.defaultNetworkCardIndex ?? 0, maxEnis: t.maximumNetworkInterfaces }];
    out.set(instanceType, {
      instanceType,
      maxEnis: t.maximumNetworkInterfaces,
      ipv4PerEni: t.ipv4AddressesPerInterface,
      defaultNetworkCardIndex: t.defaultNetworkCardIndex ?? 0,
      networkCards: cards,
      ...(t.hypervisor !== undefined ? { hypervisor: t.hypervisor } : {}),
      ...(t.bareMetal !== undefined ? { bareMetal: t.bareMetal } : {}),
    });
  }
  return out;
}

/** What an instance-type argument must look like before it is looked up (and before it reaches a message). */
export const INSTANCE_TYPE_PATTERN = /^[a-z0-9-]+\.[a-z0-9-]+$/;
