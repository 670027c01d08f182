import { readFileSync } from 'node:fs';
import { type InstanceTypeTable, instanceLimitsTable } from '../../../shared/domain/instance-types.js';
import type { InstanceLimits } from '../../../shared/domain/limits.js';

const table = instanceLimitsTable(
  JSON.parse(
    readFileSync(new URL('../../../shared/data/ec2-instance-types.json', import.meta.url), 'utf8'),
  ) as InstanceTypeTable,
);

/** Limits of a real instance type from the project's copy of AWS's data (what DescribeInstanceTypes reports). */
export function limitsOf(instanceType: string): InstanceLimits {
  const limits = table.get(instanceType);
  if (!limits) throw new Error(`unknown instance type ${instanceType}`);
  return limits;
}

export function allInstanceTypes(): string[] {
  return [...table.keys()];
}
