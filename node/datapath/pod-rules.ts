import type { RtNetlinkSocket } from 'netlink/dist/rt/rt.js';
import {
  type AddressFamily,
  AF_INET,
  afOf,
  CREATE_EXCL,
  EEXIST,
  errnoOf,
  ipBytes,
  ipOf,
  REQUEST_TIMEOUT_MS,
  rtnl,
  rtnlDelete,
} from './rtnl.js';

/**
 * L3/L3S: one `from <pod address> lookup <ENI table>` rule per pod in the host namespace, so the pod's packets
 * (routed there by ipvlan) leave through the ENI that owns their source address.
 *
 * Priority 1536 sits after the local table (0) and after the node-wide `fwmark → main` rule (1024, see
 * connmark.ts) that keeps NodePort replies on the host's path, and before main (32766).
 */
export const POD_RULE_PRIORITY = 1_536;
/** FR_ACT_TO_TBL */
const ACTION_TO_TABLE = 1;

export interface PodRule {
  readonly podIp: string;
  readonly table: number;
}

/** The rule's header for the pod's address: a /32, or a /128 for an IPv6 pod (rules are per family). */
function header(rule: PodRule): { family: number; srcLen: number; table: number; action: number } {
  const family = afOf(rule.podIp);
  return {
    family,
    srcLen: family === AF_INET ? 32 : 128,
    table: rule.table < 256 ? rule.table : 0,
    action: ACTION_TO_TABLE,
  };
}

/**
 * Adds the rule. EEXIST is taken as ours: the rule is keyed by the pod's address, which this attachment holds,
 * so an identical rule can only be a leftover of an earlier attempt for the same address (and the caller's undo
 * removes it either way).
 */
export async function addPodRule(host: RtNetlinkSocket, rule: PodRule): Promise<'added' | 'existed'> {
  try {
    await host.newRule(
      header(rule),
      { src: ipBytes(afOf(rule.podIp), rule.podIp), table: rule.table, priority: POD_RULE_PRIORITY },
      { timeout: REQUEST_TIMEOUT_MS, flags: CREATE_EXCL },
    );
    return 'added';
  } catch (err) {
    if (errnoOf(err) === EEXIST) return 'existed';
    return rtnl(`add the rule from ${rule.podIp} lookup ${rule.table}`, () => Promise.reject(err));
  }
}

export async function deletePodRule(host: RtNetlinkSocket, rule: PodRule): Promise<'removed' | 'absent'> {
  return rtnlDelete(`delete the rule from ${rule.podIp} lookup ${rule.table}`, () =>
    host.delRule(
      header(rule),
      { src: ipBytes(afOf(rule.podIp), rule.podIp), table: rule.table, priority: POD_RULE_PRIORITY },
      { timeout: REQUEST_TIMEOUT_MS },
    ),
  );
}

export interface RuleView {
  readonly src?: string;
  readonly srcLen: number;
  readonly table: number;
  readonly priority: number;
  readonly fwmark?: number;
  readonly iifname?: string;
}

/** All rules of one family (IPv4 by default) of the namespace the socket is in. */
export async function listRules(host: RtNetlinkSocket, family: AddressFamily = AF_INET): Promise<RuleView[]> {
  const rules = await rtnl('list rules', () => host.getRules({ family }, undefined, { timeout: REQUEST_TIMEOUT_MS }));
  return rules
    .filter((r) => r.data.family === family)
    .map((r) => {
      const src = ipOf(family, r.attrs.src);
      return {
        ...(src ? { src } : {}),
        srcLen: r.data.srcLen ?? 0,
        table: r.attrs.table ?? r.data.table ?? 0,
        priority: r.attrs.priority ?? 0,
        ...(r.attrs.fwmark !== undefined ? { fwmark: r.attrs.fwmark } : {}),
        ...(r.attrs.iifname !== undefined ? { iifname: r.attrs.iifname } : {}),
      };
    });
}

/** The tables the rules for this address point at (CHECK wants exactly one: the ENI's). */
export function rulesFrom(rules: readonly RuleView[], podIp: string): RuleView[] {
  const hostLength = afOf(podIp) === AF_INET ? 32 : 128;
  return rules.filter((r) => r.src === podIp && r.srcLen === hostLength);
}
