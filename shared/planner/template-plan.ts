import type { InstanceLimits } from '../domain/limits.js';
import type { IpFamilySetting } from '../domain/node.js';
import { PlanError } from './errors.js';
import { planLaunch } from './launch-plan.js';

export interface TemplatePlanInput {
  readonly limits: InstanceLimits;
  readonly prefixDelegation: boolean;
  readonly minLeases: number;
  readonly warmHighLeases: number;
  readonly maxPods: number;
  readonly ipFamily?: IpFamilySetting;
}

/** A pod ENI a launch template declares: EC2 creates it at RunInstances, in the node's subnet or a pod subnet. */
export interface TemplateEni {
  readonly deviceIndex: number;
  readonly networkCardIndex: number;
  /** SecondaryPrivateIpAddressCount (0 in prefix mode). */
  readonly ipCount: number;
  /** Ipv4PrefixCount (0 in secondary-address mode). */
  readonly prefixCount: number;
}

const ANY_SUBNET = 'launch-template';

/**
 * The pod ENIs a node group's launch template declares: the very plan a launch would make (launch-plan.ts)
 * for an instance with only its boot ENI, so adopted and created nodes get the same ENIs and addresses. The
 * subnet is left open (EC2 checks its room at RunInstances, where a full subnet fails the launch).
 * @throws PlanError as planLaunch does (type below minLeases, prefix delegation off Nitro).
 */
export function planTemplateEnis(input: TemplatePlanInput): TemplateEni[] {
  // The /80 and its subnet's /64 are known only once EC2 has made the ENI, and a template names no subnet.
  if ((input.ipFamily ?? 'ipv4') !== 'ipv4')
    throw new PlanError(
      'config',
      `launch-template pod ENIs are IPv4 only; ipFamily ${input.ipFamily} needs the launch to create its pod ENIs`,
    );
  const plan = planLaunch({
    ...input,
    availabilityZone: ANY_SUBNET,
    subnets: [
      {
        subnetId: ANY_SUBNET,
        cidr: '0.0.0.0/0',
        availabilityZone: ANY_SUBNET,
        availableIpCount: Number.MAX_SAFE_INTEGER,
      },
    ],
    existing: [{ deviceIndex: 0, networkCardIndex: input.limits.defaultNetworkCardIndex }],
  });
  return plan.enis.map(({ deviceIndex, networkCardIndex, ipCount, prefixCount }) => ({
    deviceIndex,
    networkCardIndex,
    ipCount,
    prefixCount,
  }));
}
