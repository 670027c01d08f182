import type { Ec2Port } from '../../../shared/ec2/port.js';
import { checkInvariants } from '../../../shared/invariants/checker.js';
import type { LeaseStore } from '../../../shared/lease-store/port.js';
import type { InvariantKey } from './report.js';

export interface CheckAllInput {
  readonly ec2: Ec2Port;
  readonly store: LeaseStore;
  readonly clusterName: string;
  readonly minLeases: number;
  /** Invariant 1 as the workload saw it from the pods' side (workload.ts). */
  readonly workloadViolations: readonly string[];
  /** Lifecycle events that failed every delivery: a launch left to its hook's timeout (4). */
  readonly dlqMessages: number;
}

export interface CheckAllResult {
  readonly invariants: Record<InvariantKey, boolean>;
  readonly violations: string[];
}

/**
 * The invariants of DESIGN.md the local run can observe: 1 from the pods' side, 2–6 with the shared checker
 * (EC2 against the table, through the same ports the control plane uses), 4 also from the DLQ.
 */
export async function checkAll(input: CheckAllInput): Promise<CheckAllResult> {
  const report = await checkInvariants(input.ec2, input.store, {
    clusterName: input.clusterName,
    minLeases: input.minLeases,
    nowMs: Date.now(),
    // A pool-manager ENI created but not yet attached is in flight, not leaked: the reconciler's bound.
    maxUnattachedAgeMs: 30_000,
    maxProvisioningMs: 60_000,
  });
  const violations = [
    ...input.workloadViolations.map((m) => `invariant 1: ${m}`),
    ...report.violations.map((v) => `invariant ${v.invariant}: ${v.message}`),
  ];
  if (input.dlqMessages > 0)
    violations.push(`invariant 4: ${input.dlqMessages} lifecycle event(s) in the dead-letter queue`);
  const holds = (n: number): boolean => !violations.some((v) => v.startsWith(`invariant ${n}:`));
  return {
    invariants: { '1': holds(1), '2': holds(2), '3': holds(3), '4': holds(4), '5': holds(5), '6': holds(6) },
    violations,
  };
}
