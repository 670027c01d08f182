import type { RtNetlinkSocket } from 'netlink/dist/rt/rt.js';
import {
  addHostFwmarkRule,
  addPodFwmarkRule,
  CONNMARK,
  HOST_FWMARK_RULE_PRIORITY,
  hostChainsInput,
  IptablesError,
  iptablesCommand,
  jumpsPresent,
  listed,
  POD_RETURN_TABLE,
  runAsync,
} from './connmark.js';
import { HOST_VETH_LINK_LOCAL } from './host-veth.js';
import { inNetns } from './native.js';
import { listRules } from './pod-rules.js';
import { AF_INET6, CREATE_REPLACE, ipBytes, REQUEST_TIMEOUT_MS, rtnl } from './rtnl.js';

// connmark.ts for IPv6: the same marks, chains and return path in ip6tables and the IPv6 rule set, which the
// kernel keeps apart from IPv4's. The pod's return route leads to the host end's link-local address (host-veth.ts).

const WAIT = ['-w', '5'];

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
export function ensureHostConnmark6(host: RtNetlinkSocket): Promise<'installed' | 'present'> {
  installing6 ??= installHostConnmark6(host).finally(() => {
    installing6 = undefined;
  });
  return installing6;
}
/** Concurrent first ADDs share one install. */
let installing6: Promise<'installed' | 'present'> | undefined;

async function installHostConnmark6(host: RtNetlinkSocket): Promise<'installed' | 'present'> {
  const rules = await listRules(host, AF_INET6);
  if (rules.some((r) => r.fwmark === CONNMARK && r.priority === HOST_FWMARK_RULE_PRIORITY)) return 'present';
  const input = hostChainsInput(await jumpsPresent(iptablesCommand('ip6tables')));
  const res = await runAsync(iptablesCommand('ip6tables-restore'), [...WAIT, '--noflush'], input);
  if (res.status !== 0) throw new IptablesError(`failed to install the host IPv6 connmark rules: ${res.stderr.trim()}`);
  await addHostFwmarkRule(host, AF_INET6);
  return 'installed';
}
