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

/** Subnets a top-up plans around, by the kind of request EC2 refused there (subnet-holds.ts). */
export interface ClosedSubnets {
  readonly prefixes: ReadonlySet<string>;
  readonly addresses: ReadonlySet<string>;
}

const NO_CLOSED_SUBNETS: ClosedSubnets = { prefixes: new Set(), addresses: new Set() };

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
  /** Subnets EC2 refused for room lately, by request kind (subnet-holds.ts): nothing is planned there. */
  readonly closed?: ClosedSubnets;
  /**
   * Prefix mode: once a subnet has refused a /28, plan single addresses for what /28s cannot cover
   * (`prefixFallbackToAddresses`), after every other subnet's /28s.
   */
  readonly addressFallback?: boolean;
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
 * slot and subnet rules as at launch). Prefix mode asks for whole /28s, and with the fallback on, single
 * addresses for the rest. Subnets closed to a kind of request get none of it. Pure.
 */
export function planTopUp(input: TopUpInput): TopUpPlan {
  if (input.needed <= 0) return { assign: [], newEnis: [], plannedAddresses: 0, shortfall: 0 };
  const closed = input.closed ?? NO_CLOSED_SUBNETS;
  const room: Room = {
    subnets: new Map(input.subnets.map((s) => [s.subnetId, s.availableIpCount])),
    slotsUsed: new Map(input.enis.map((e) => [e.eniId, e.slotsUsed])),
    interfaces: [...input.interfaces],
  };
  const first = planKind(
    input,
    room,
    input.prefixDelegation,
    input.needed,
    input.prefixDelegation ? closed.prefixes : closed.addresses,
  );
  let plan = first;
  const rest = input.needed - first.plannedAddresses;
  if (input.prefixDelegation && input.addressFallback && rest > 0 && closed.prefixes.size > 0) {
    const second = planKind(input, room, false, rest, closed.addresses);
    plan = {
      assign: [...first.assign, ...second.assign],
      newEnis: [...first.newEnis, ...second.newEnis],
      plannedAddresses: first.plannedAddresses + second.plannedAddresses,
    };
  }
  return { ...plan, shortfall: Math.max(0, input.needed - plan.plannedAddresses) };
}

/** What the planned requests have taken so far: subnet addresses, ENI slots, device indexes. */
interface Room {
  readonly subnets: Map<string, number>;
  readonly slotsUsed: Map<string, number>;
  readonly interfaces: ExistingInterface[];
}

/** One kind of request (/28s or single addresses) for `needed` addresses, taking what it plans out of `room`. */
function planKind(
  input: TopUpInput,
  room: Room,
  prefixes: boolean,
  needed: number,
  closed: ReadonlySet<string>,
): Omit<TopUpPlan, 'shortfall'> {
  const unit = prefixes ? ADDRESSES_PER_PREFIX : 1;
  const slotsPerEni = Math.max(0, input.limits.ipv4PerEni - 1);
  // A subnet we know nothing about is not limited here: EC2 answers InsufficientFreeAddressesInSubnet.
  const free = (subnetId: string) => room.subnets.get(subnetId) ?? Number.MAX_SAFE_INTEGER;
  const wantedUnits = Math.ceil(needed / unit);
  let unitsLeft = wantedUnits;
  const assign: AssignStep[] = [];
  for (const eni of [...input.enis].sort((a, b) => a.deviceIndex - b.deviceIndex)) {
    if (unitsLeft <= 0) break;
    if (closed.has(eni.subnetId)) continue;
    const take = Math.min(
      slotsPerEni - room.slotsUsed.get(eni.eniId)!,
      unitsLeft,
      Math.floor(free(eni.subnetId) / unit),
    );
    if (take <= 0) continue;
    assign.push({ eniId: eni.eniId, ipCount: prefixes ? 0 : take, prefixCount: prefixes ? take : 0 });
    room.slotsUsed.set(eni.eniId, room.slotsUsed.get(eni.eniId)! + take);
    room.subnets.set(eni.subnetId, free(eni.subnetId) - take * unit);
    unitsLeft -= take;
  }
  let newEnis: PlannedEni[] = [];
  if (unitsLeft > 0 && addressesPerPodEni(input.limits, prefixes) > 0) {
    const addresses = unitsLeft * unit;
    newEnis = [
      ...planLaunch({
        limits: input.limits,
        availabilityZone: input.availabilityZone,
        prefixDelegation: prefixes,
        minLeases: 0,
        warmHighLeases: addresses,
        maxPods: addresses,
        subnets: input.subnets
          .filter((s) => !closed.has(s.subnetId))
          .map((s) => ({ ...s, availableIpCount: free(s.subnetId) })),
        existing: room.interfaces,
      }).enis,
    ];
    for (const eni of newEnis) {
      const units = prefixes ? eni.prefixCount : eni.ipCount;
      unitsLeft -= units;
      room.interfaces.push({ deviceIndex: eni.deviceIndex, networkCardIndex: eni.networkCardIndex });
      room.subnets.set(eni.subnetId, free(eni.subnetId) - 1 - units * unit);
    }
  }
  return { assign, newEnis, plannedAddresses: (wantedUnits - Math.max(0, unitsLeft)) * unit };
}
