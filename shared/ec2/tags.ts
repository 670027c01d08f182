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
  /**
   * The reconciler's two-pass mark (shared/reconcile/gc-plan.ts): the time of the pass that first saw the ENI
   * collectable. Not set on create; the reconciler's role may add and remove it but never the cluster tag.
   */
  gcMarkedAt: 'vpc-lease:gc-marked-at',
} as const;

/** Which part of vpc-lease created the ENI (the owner tag's value). */
export const LIFECYCLE_OWNER = 'instance-lifecycle';
/** The owner of ENIs the pool-manager adds to READY nodes. */
export const POOL_OWNER = 'pool-manager';
/**
 * The owner of pod ENIs EC2 creates from the node group's launch template (adopted by the lifecycle Lambda).
 * A template's tags are the same for every instance, so these carry no instance, created-at or device-index
 * tag: their attachment says whose they are.
 */
export const LAUNCH_TEMPLATE_OWNER = 'launch-template';

/** The network-interface TagSpecification of a launch template that declares pod ENIs. */
export function launchTemplateEniTags(clusterName: string): Record<string, string> {
  return { [ENI_TAGS.cluster]: clusterName, [ENI_TAGS.owner]: LAUNCH_TEMPLATE_OWNER };
}

/** The instance a vpc-lease ENI belongs to: its instance tag, or for a launch-template ENI its attachment. */
export function eniInstanceOf(eni: {
  readonly tags: Readonly<Record<string, string>>;
  readonly attachment?: { readonly instanceId: string } | undefined;
}): string | undefined {
  const tagged = eni.tags[ENI_TAGS.instance];
  if (tagged) return tagged;
  return eni.tags[ENI_TAGS.owner] === LAUNCH_TEMPLATE_OWNER ? eni.attachment?.instanceId : undefined;
}

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
 *
 * `plannedAtMs` salts the token of an ENI planned on a READY node (the pool's): a device index is reused
 * after its ENI is gone (refused, or collected by the reconciler), and EC2 answers a replayed token with the
 * original — deleted — ENI; a new plan must get a new ENI. A launch plans each device index once per
 * instance, so its tokens are unsalted.
 */
export function eniClientToken(
  instanceId: string,
  deviceIndex: number,
  request: {
    readonly subnetId: string;
    readonly ipCount: number;
    readonly prefixCount: number;
    readonly ipv6PrefixCount?: number;
  },
  plannedAtMs?: number,
): string {
  // IPv6 only when asked, so IPv4 ENIs keep the tokens they always had.
  const v6 = request.ipv6PrefixCount ? `/v6:${request.ipv6PrefixCount}` : '';
  const salt = `${v6}${plannedAtMs === undefined ? '' : `/${plannedAtMs}`}`;
  const digest = createHash('sha256')
    .update(`${instanceId}/${deviceIndex}/${request.subnetId}/${request.ipCount}/${request.prefixCount}${salt}`)
    .digest('hex')
    .slice(0, 32);
  return `${plannedAtMs === undefined ? 'vl' : 'vlp'}-${instanceId}-${deviceIndex}-${digest}`.slice(0, 64);
}
