import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { InstanceLimits } from '../../../shared/domain/limits.js';

/**
 * The data the simulator enforces, read with fs at start (not imported: the instance-type table is ~300 KB and
 * must not end up in every bundle that imports the simulator's types).
 */
const DATA_DIR = join(dirname(fileURLToPath(import.meta.url)), '../../../shared/data');

interface RawInstanceType {
  maximumNetworkInterfaces: number;
  ipv4AddressesPerInterface: number;
  defaultNetworkCardIndex?: number;
  networkCards?: { networkCardIndex: number; maximumNetworkInterfaces: number }[];
  hypervisor?: string;
  bareMetal?: boolean;
}

export function loadInstanceTypes(path = join(DATA_DIR, 'ec2-instance-types.json')): Map<string, InstanceLimits> {
  const raw = JSON.parse(readFileSync(path, 'utf8')) as { instanceTypes: Record<string, RawInstanceType> };
  const out = new Map<string, InstanceLimits>();
  for (const [instanceType, t] of Object.entries(raw.instanceTypes)) {
    const cards = t.networkCards?.length
      ? t.networkCards.map((c) => ({ networkCardIndex: c.networkCardIndex, maxEnis: c.maximumNetworkInterfaces }))
      : [{ networkCardIndex: 0, maxEnis: t.maximumNetworkInterfaces }];
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

export interface BucketSpec {
  /** Tokens the bucket holds when full. */
  readonly bucket: number;
  readonly refillPerSecond: number;
}

export interface ThrottlingTable {
  /** Keyed by action name, `Describe*`, or the special DescribeNetworkInterfaces key. */
  readonly buckets: Readonly<Record<string, BucketSpec>>;
  readonly otherMutating: BucketSpec;
}

export function loadThrottling(path = join(DATA_DIR, 'ec2-api-throttling.json')): ThrottlingTable {
  return JSON.parse(readFileSync(path, 'utf8')) as ThrottlingTable;
}
