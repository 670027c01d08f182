import { createHash } from 'node:crypto';

/**
 * Tags on every ENI vpc-lease creates (DESIGN.md invariant 3). The reconciler finds leaks by them and the
 * Lambdas' IAM policy scopes EC2 rights by `vpc-lease:cluster` (`aws:ResourceTag` / `aws:RequestTag`).
 */
export const ENI_TAGS = {
  cluster: 'vpc-lease:cluster',
  instance: 'vpc-lease:instance-id',
  owner: 'vpc-lease:owner',
  createdAt: 'vpc-lease:created-at',
  deviceIndex: 'vpc-lease:device-index',
} as const;

/** Which part of vpc-lease created the ENI (the owner tag's value). */
export const LIFECYCLE_OWNER = 'instance-lifecycle';

export function podEniTags(
  clusterName: string,
  instanceId: string,
  deviceIndex: number,
  createdAtMs: number,
  owner = LIFECYCLE_OWNER,
): Record<string, string> {
  return {
    [ENI_TAGS.cluster]: clusterName,
    [ENI_TAGS.instance]: instanceId,
    [ENI_TAGS.owner]: owner,
    [ENI_TAGS.createdAt]: new Date(createdAtMs).toISOString(),
    [ENI_TAGS.deviceIndex]: String(deviceIndex),
    Name: `${clusterName}-${instanceId}-eth${deviceIndex}`,
  };
}

/**
 * The ClientToken of the ENI planned at (instance, device index). It also hashes the request's subnet and
 * address counts: the plan is written to the node item before the call and never changes while a create may
 * have succeeded, so a retry always sends the same token with the same parameters (same ENI back); only after
 * EC2 refused a create outright (subnet full) is the ENI replanned, and the new parameters get a new token
 * instead of an IdempotentParameterMismatch. ≤ 64 ASCII characters, as EC2 requires.
 */
export function eniClientToken(
  instanceId: string,
  deviceIndex: number,
  request: { readonly subnetId: string; readonly ipCount: number; readonly prefixCount: number },
): string {
  const digest = createHash('sha256')
    .update(`${instanceId}/${deviceIndex}/${request.subnetId}/${request.ipCount}/${request.prefixCount}`)
    .digest('hex')
    .slice(0, 32);
  return `vl-${instanceId}-${deviceIndex}-${digest}`.slice(0, 64);
}
