/** A subnet as the planner needs it (from DescribeSubnets). */
export interface SubnetCandidate {
  readonly subnetId: string;
  readonly cidr: string;
  /** Present when the subnet has an IPv6 CIDR; `ipv6` and `dual` nodes plan only on such subnets. */
  readonly ipv6Cidr?: string;
  readonly availabilityZone: string;
  readonly availableIpCount: number;
}

/**
 * Candidate pod subnets in the instance's AZ (an ENI cannot attach across AZs), most free addresses first;
 * ties broken by id so the choice is deterministic and a resumed launch plans the same way.
 */
export function rankSubnets(subnets: readonly SubnetCandidate[], availabilityZone: string): SubnetCandidate[] {
  const seen = new Set<string>();
  return subnets
    .filter((s) => s.availabilityZone === availabilityZone && !seen.has(s.subnetId) && seen.add(s.subnetId))
    .sort((a, b) => b.availableIpCount - a.availableIpCount || a.subnetId.localeCompare(b.subnetId));
}
