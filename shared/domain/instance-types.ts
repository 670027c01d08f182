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

/** One type as a row: name, ENIs, IPv4 per ENI, default card, [card, ENIs] per card, hypervisor, bare metal. */
export type InstanceTypeRow = [string, number, number, number, [number, number][], string | null, boolean | null];

/**
 * The table as rows, a fifth of its size: the form built into the node binary (packaging/build.ts), which
 * expandInstanceRows turns back into the very same table.
 */
export function instanceTypeRows(table: InstanceTypeTable): InstanceTypeRow[] {
  return Object.entries(table.instanceTypes).map(([name, t]) => [
    name,
    t.maximumNetworkInterfaces,
    t.ipv4AddressesPerInterface,
    t.defaultNetworkCardIndex ?? 0,
    (t.networkCards ?? []).map((c) => [c.networkCardIndex, c.maximumNetworkInterfaces]),
    t.hypervisor ?? null,
    t.bareMetal ?? null,
  ]);
}

export function expandInstanceRows(rows: readonly InstanceTypeRow[]): InstanceTypeTable {
  const instanceTypes: Record<string, RawInstanceType> = {};
  for (const [name, maxEnis, ipv4, defaultCard, cards, hypervisor, bareMetal] of rows)
    instanceTypes[name] = {
      maximumNetworkInterfaces: maxEnis,
      ipv4AddressesPerInterface: ipv4,
      defaultNetworkCardIndex: defaultCard,
      networkCards: cards.map(([networkCardIndex, maximumNetworkInterfaces]) => ({
        networkCardIndex,
        maximumNetworkInterfaces,
      })),
      ...(hypervisor !== null ? { hypervisor } : {}),
      ...(bareMetal !== null ? { bareMetal } : {}),
    };
  return { instanceTypes };
}
