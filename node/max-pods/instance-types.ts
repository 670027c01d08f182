import table from '../../shared/data/ec2-instance-types.json' with { type: 'json' };
import { type InstanceTypeTable, instanceLimitsTable } from '../../shared/domain/instance-types.js';
import type { InstanceLimits } from '../../shared/domain/limits.js';

/**
 * The shipped instance-type table, built into the node binary: a node holds no EC2 rights, and IMDS tells only
 * the type's name. Only `vpc-lease-cni max-pods` imports this module (lazily), so ADD and DEL never parse it.
 */
let limitsByType: Map<string, InstanceLimits> | undefined;

export function shippedInstanceLimits(instanceType: string): InstanceLimits | undefined {
  limitsByType ??= instanceLimitsTable(table as InstanceTypeTable);
  return limitsByType.get(instanceType);
}
