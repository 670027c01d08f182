import { readFileSync } from 'node:fs';

/**
 * The capabilities the agent uses, each for what needs it; the DaemonSet drops every other one
 * (node/deploy/daemonset.yaml). Checked at start, so a securityContext without one fails with its name in the
 * log instead of every ADD failing later with EPERM.
 */
export const AGENT_CAPABILITIES: readonly { name: string; bit: number; why: string }[] = [
  { name: 'CAP_NET_ADMIN', bit: 12, why: 'netlink writes (links, addresses, routes, rules), iptables, /proc/sys/net' },
  { name: 'CAP_NET_RAW', bit: 13, why: 'iptables-legacy opens a raw socket to read and replace tables' },
  { name: 'CAP_SYS_ADMIN', bit: 21, why: 'setns(2) into pods’ network namespaces' },
];

/** The effective set of this process (CapEff in /proc/self/status). */
function effective(): bigint {
  const hex = /^CapEff:\s*([0-9a-f]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
  return hex ? BigInt(`0x${hex}`) : 0n;
}

/** The agent's capabilities this process lacks (none when it runs with all of them). */
export function missingCapabilities(): typeof AGENT_CAPABILITIES {
  const have = effective();
  return AGENT_CAPABILITIES.filter((c) => (have & (1n << BigInt(c.bit))) === 0n);
}
