import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type InstanceTypeTable, instanceLimitsTable } from '../domain/instance-types.js';
import type { InstanceLimits } from '../domain/limits.js';

/**
 * The data the simulator enforces, read with fs at start (not imported: the instance-type table is ~300 KB and
 * must not end up in every bundle that imports the simulator's types).
 */
const DATA_DIR = dirname(fileURLToPath(import.meta.url));

export function loadInstanceTypes(path = join(DATA_DIR, 'ec2-instance-types.json')): Map<string, InstanceLimits> {
  return instanceLimitsTable(JSON.parse(readFileSync(path, 'utf8')) as InstanceTypeTable);
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
