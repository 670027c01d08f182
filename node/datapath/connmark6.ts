import type { RtNetlinkSocket } from 'netlink/dist/rt/rt.js';
import {
  addHostFwmarkRule,
  addPodFwmarkRule,
  CONNMARK,
  HOST_FWMARK_RULE_PRIORITY,
  hostChainsInput,
  IptablesError,
  iptablesCommand,
  listed,
  POD_RETURN_TABLE,
  podRules,
  run,
  spawnInNetns,
} from './connmark.js';
import { HOST_VETH_LINK_LOCAL } from './host-veth.js';
import { inNetns } from './native.js';
import { listRules } from './pod-rules.js';
import { AF_INET6, CREATE_REPLACE, ipBytes, REQUEST_TIMEOUT_MS, rtnl } from './rtnl.js';

// connmark.ts for IPv6: the same marks, chains and return path in ip6tables and the IPv6 rule set, which the
// kernel keeps apart from IPv4's. The pod's return route leads to the host end's link-local address (host-veth.ts).

const WAIT = ['-w', '5'];

function restore6(input: string): { status: number; stderr: string } {
  return run(iptablesCommand('ip6tables-restore'), [...WAIT, '--noflush'], input);
}

/**
 * Installs the pod-side IPv6 mark rules as startInstallPodConnmark does IPv4's: one ip6tables-restore forked now
 * and finished in the background, which the caller awaits before the pod counts as ready.
 */
export function startInstallPodConnmark6(podNsFd: number, podVeth: string): Promise<void> {
  const input = ['*mangle', ...podRules(podVeth).map((r) => `-A ${r}`), 'COMMIT', ''].join('\n');
  return spawnInNetns(podNsFd, iptablesCommand('ip6tables-restore'), [...WAIT, '--noflush'], input).then((res) => {
    if (res.status !== 0)
      throw new IptablesError(`failed to install the pod IPv6 connmark rules: ${res.stderr.trim()}`);
  });
}

/** Removes them; rules already gone are fine (DEL and undo are idempotent). */
export function removePodConnmark6(podNsFd: number, podVeth: string): 'removed' | 'absent' {
  const rules = podRules(podVeth);
  return inNetns(podNsFd, () => {
    if (restore6(['*mangle', ...rules.map((r) => `-D ${r}`), 'COMMIT', ''].join('\n')).status === 0) return 'removed';
    let removed = false;
    for (const rule of rules)
      removed ||= run(iptablesCommand('ip6tables'), [...WAIT, '-t', 'mangle', '-D', ...rule.split(' ')]).status === 0;
    return removed ? 'removed' : 'absent';
  });
}

/** The IPv6 mangle rules of a namespace as ip6tables -S prints them (CHECK and tests). */
export function mangleRules6(podNsFd?: number): string[] {
  const read = (): string[] => listed(iptablesCommand('ip6tables'), ['-t', 'mangle', '-S']);
  return podNsFd === undefined ? read() : inNetns(podNsFd, read);
}

/** The pod's IPv6 return path: `fwmark 0x80/0x80 lookup 117`, and table 117's `::/0` via the host end. */
export async function addPodReturnPath6(pod: RtNetlinkSocket, podIndex: number): Promise<void> {
  await rtnl('add the pod IPv6 return route through the host veth', () =>
    pod.newRoute(
      { family: AF_INET6, dstLen: 0, table: POD_RETURN_TABLE, protocol: 'BOOT', scope: 'UNIVERSE', type: 'UNICAST' },
      { table: POD_RETURN_TABLE, gateway: ipBytes(AF_INET6, HOST_VETH_LINK_LOCAL), oif: podIndex },
      { timeout: REQUEST_TIMEOUT_MS, flags: CREATE_REPLACE },
    ),
  );
  await addPodFwmarkRule(pod, AF_INET6);
}

/**
 * The node-wide half for IPv6, installed by the first IPv6 pod with a host veth, the fwmark rule last (its
 * presence says the chains are there). IPv6 has no rp_filter sysctl, so nothing is loosened.
 */
export async function ensureHostConnmark6(host: RtNetlinkSocket): Promise<'installed' | 'present'> {
  const rules = await listRules(host, AF_INET6);
  if (rules.some((r) => r.fwmark === CONNMARK && r.priority === HOST_FWMARK_RULE_PRIORITY)) return 'present';
  const has = (table: string, chain: string, target: string): boolean =>
    run(iptablesCommand('ip6tables'), [...WAIT, '-t', table, '-C', chain, '-j', target]).status === 0;
  const res = restore6(hostChainsInput(has));
  if (res.status !== 0) throw new IptablesError(`failed to install the host IPv6 connmark rules: ${res.stderr.trim()}`);
  await addHostFwmarkRule(host, AF_INET6);
  return 'installed';
}
