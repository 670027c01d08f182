import { readFileSync } from 'node:fs';
import type { InstanceLimits } from '../../../shared/domain/limits.js';

interface RawType {
  maximumNetworkInterfaces: number;
  ipv4AddressesPerInterface: number;
  defaultNetworkCardIndex: number;
  networkCards: { networkCardIndex: number; maximumNetworkInterfaces: number }[];
  hypervisor?: string;
  bareMetal?: boolean;
}

const raw = JSON.parse(readFileSync(new URL('../../../shared/data/ec2-instance-types.json', import.meta.url), 'utf8'))
  .instanceTypes as Record<string, RawType>;

/** Limits of a real instance type from the project's copy of AWS's data (what DescribeInstanceTypes reports). */
export function limitsOf(instanceType: string): InstanceLimits {
  const t = raw[instanceType];
  if (!t) throw new Error(`unknown instance type ${instanceType}`);
  return {
    instanceType,
    maxEnis: t.maximumNetworkInterfaces,
    ipv4PerEni: t.ipv4AddressesPerInterface,
    defaultNetworkCardIndex: t.defaultNetworkCardIndex,
    networkCards: t.networkCards.map((c) => ({
      networkCardIndex: c.networkCardIndex,
      maxEnis: c.maximumNetworkInterfaces,
    })),
    ...(t.hypervisor ? { hypervisor: t.hypervisor } : {}),
    ...(t.bareMetal !== undefined ? { bareMetal: t.bareMetal } : {}),
  };
}

export function allInstanceTypes(): string[] {
  return Object.keys(raw);
}
