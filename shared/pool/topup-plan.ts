import { ADDRESSES_PER_PREFIX, type InstanceLimits } from '../domain/limits.js';
import { type ExistingInterface, type PlannedEni, planLaunch } from '../planner/launch-plan.js';
import { addressesPerPodEni } from '../planner/max-pods.js';
import type { SubnetCandidate } from '../planner/subnets.js';

/** A pod ENI of a READY node as EC2 reports it now. */
export interface PoolEni {
  readonly eniId: string;
  readonly deviceIndex: number;
  readonly subnetId: string;
  /** Secondary addresses + delegated prefixes: each takes one of the type's IPv4-per-ENI slots. */
  readonly slotsUsed: number;
}

export interface TopUpInput {
  /** Addresses wanted (calculateNeededAddresses). */
  readonly needed: number;
  readonly limits: InstanceLimits;
  readonly prefixDelegation: boolean;
  readonly availabilityZone: string;
  /** The node's pod ENIs (attached, recorded on the node item). */
  readonly enis: readonly PoolEni[];
  /** Every interface attached to the instance (boot ENI included): their slots are taken. */
  readonly interfaces: readonly ExistingInterface[];
  /** Candidate subnets for a new ENI, and the free-address counts of the existing ENIs' subnets. */
  readonly subnets: readonly SubnetCandidate[];
}

export interface AssignStep {
  readonly eniId: string;
  readonly ipCount: number;
  readonly prefixCount: number;
}

export interface TopUpPlan {
  /** Addresses or prefixes to add to ENIs the node already has — one AssignPrivateIpAddresses each. */
  readonly assign: readonly AssignStep[];
  /** ENIs to create and attach when the existing ones are full. */
  readonly newEnis: readonly PlannedEni[];
  /** Addresses the plan yields (prefix mode: whole /28s, so it may exceed `needed` by up to 15). */
  readonly plannedAddresses: number;
  /** Addresses that could not be planned: instance limits or subnets are exhausted. */
  readonly shortfall: number;
}

/**
 * Plans a top-up: fill the ENIs the node already has first (one cheap Assign call each, no attachment wait),
 * lowest device index first so addresses pack onto few ENIs; then plan new ENIs with the launch planner (same
 * slot and subnet rules as at launch). Prefix mode asks for whole /28s. Pure.
 */
export function planTopUp(input: TopUpInput): TopUpPlan {
  if (input.needed <= 0) return { assign: [], newEnis: [], plannedAddresses: 0, shortfall: 0 };
  const unit = input.prefixDelegation ? ADDRESSES_PER_PREFIX : 1;
  const slotsPerEni = Math.max(0, input.limits.ipv4PerEni - 1);
  const room = new Map(input.subnets.map((s) => [s.subnetId, s.availableIpCount]));
  let unitsLeft = Math.ceil(input.needed / unit);
  const assign: AssignStep[] = [];
  for (const eni of [...input.enis].sort((a, b) => a.deviceIndex - b.deviceIndex)) {
    if (unitsLeft <= 0) break;
    const free = slotsPerEni - eni.slotsUsed;
    // A subnet we know nothing about is not limited here: EC2 answers InsufficientFreeAddressesInSubnet.
    const subnetUnits = Math.floor((room.get(eni.subnetId) ?? Number.MAX_SAFE_INTEGER) / unit);
    const take = Math.min(free, unitsLeft, subnetUnits);
    if (take <= 0) continue;
    assign.push({
      eniId: eni.eniId,
      ipCount: input.prefixDelegation ? 0 : take,
      prefixCount: input.prefixDelegation ? take : 0,
    });
    room.set(eni.subnetId, (room.get(eni.subnetId) ?? Number.MAX_SAFE_INTEGER) - take * unit);
    unitsLeft -= take;
  }
  let newEnis: PlannedEni[] = [];
  if (unitsLeft > 0 && addressesPerPodEni(input.limits, input.prefixDelegation) > 0) {
    const addresses = unitsLeft * unit;
    newEnis = [
      ...planLaunch({
        limits: input.limits,
        availabilityZone: input.availabilityZone,
        prefixDelegation: input.prefixDelegation,
        minLeases: 0,
        warmHighLeases: addresses,
        maxPods: addresses,
        subnets: input.subnets.map((s) => ({ ...s, availableIpCount: room.get(s.subnetId) ?? s.availableIpCount })),
        existing: input.interfaces,
      }).enis,
    ];
    for (const eni of newEnis) unitsLeft -= input.prefixDelegation ? eni.prefixCount : eni.ipCount;
  }
  const plannedUnits = Math.ceil(input.needed / unit) - Math.max(0, unitsLeft);
  const plannedAddresses = plannedUnits * unit;
  return { assign, newEnis, plannedAddresses, shortfall: Math.max(0, input.needed - plannedAddresses) };
}
