import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RtNetlinkSocket } from 'netlink/dist/rt/rt.js';
import { formatIpv4, parseCidr } from '../../shared/ipv4.js';
import { IptablesError, iptablesCommand, run } from './connmark.js';
import { listed } from './connmark6.js';
import { IMDS_ADDRESS } from './port.js';
import { assertIfName } from './rp-filter.js';
import { AF_INET, CREATE_EXCL, CREATE_REPLACE, ipBytes, REQUEST_TIMEOUT_MS, RT_TABLE_MAIN, rtnl } from './rtnl.js';

/**
 * IPv4 egress for IPv6-only pods, as aws-vpc-cni's egress plugin gives it: the pod's end of the host veth gets a
 * link-local IPv4 address, a default route to the host, and the host forwards what it sends out with the node's
 * address (MASQUERADE: the address of the interface the main table sends it out by, the boot ENI, which EC2's
 * source/destination check accepts). Per pod, the host accepts and rewrites only that address arriving on that
 * pod's veth, and never forwards it to a link-local destination (IMDS answers the node's address).
 */
export const EGRESS4_CIDR = '169.254.172.0/22';
export const EGRESS_CHAIN = 'VPC-LEASE-EGRESS4';
const LINK_LOCAL = '169.254.0.0/16';
const MULTICAST = '224.0.0.0/4';
const range = parseCidr(EGRESS4_CIDR);
/** The range less its network and broadcast addresses: far more than any node's max-pods. */
const SLOTS = 2 ** (32 - range.prefixLength) - 2;

/** The egress addresses' directory under the plugin's dataDir. */
export function egressStateDir(dataDir: string): string {
  return join(dataDir, 'egress4');
}

function attachmentKey(containerId: string, ifName: string): string {
  return `${containerId}/${ifName}`;
}

/** The address this attachment holds, if any (a repeated ADD, DEL). */
export function findEgressAddress(dir: string, containerId: string, ifName: string): string | undefined {
  const key = attachmentKey(containerId, ifName);
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return undefined;
  }
  return names.find((name) => {
    try {
      return readFileSync(join(dir, name), 'utf8') === key;
    } catch {
      return false; // released meanwhile
    }
  });
}

/**
 * A node-unique address for the attachment: one file per address, created exclusively, so the file system is
 * the lock between concurrent plugin processes (as host-local's). The search starts at a hash of the attachment,
 * so concurrent ADDs rarely probe the same files.
 */
export function claimEgressAddress(dir: string, containerId: string, ifName: string): string {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const own = findEgressAddress(dir, containerId, ifName);
  if (own) return own;
  const key = attachmentKey(containerId, ifName);
  const start = createHash('sha256').update(key).digest().readUInt32BE(0) % SLOTS;
  for (let i = 0; i < SLOTS; i++) {
    const ip = formatIpv4(range.network + 1 + ((start + i) % SLOTS));
    try {
      writeFileSync(join(dir, ip), key, { flag: 'wx', mode: 0o600 });
      return ip;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  throw new IptablesError(`no free IPv4 egress address in ${EGRESS4_CIDR}`);
}

export function releaseEgressAddress(dir: string, ip: string): void {
  rmSync(join(dir, ip), { force: true });
}

function podEgressRules(hostVeth: string, ip: string): { filter: string[]; nat: string[] } {
  assertIfName(hostVeth);
  const from = `-s ${ip}/32 -i ${hostVeth}`;
  return {
    filter: [`-A ${EGRESS_CHAIN} ${from} -d ${LINK_LOCAL} -j DROP`, `-A ${EGRESS_CHAIN} ${from} -j ACCEPT`],
    nat: [`-A ${EGRESS_CHAIN} -s ${ip}/32 ! -d ${MULTICAST} ! -o vlh+ -j MASQUERADE`],
  };
}

function restore(input: string): { status: number; stderr: string } {
  return run(iptablesCommand('iptables-restore'), ['-w', '5', '--noflush'], input);
}

/**
 * The node-wide chains, made once: the filter chain first in FORWARD (ahead of connmark.ts's VPC-LEASE-FORWARD,
 * which drops whatever a pod veth sends that is not service traffic), the nat chain in POSTROUTING. A chain is
 * declared only when missing: declaring one in a --noflush restore empties it.
 */
function ensureEgressChains(): void {
  const ipt = iptablesCommand('iptables');
  const exists = (table: string): boolean => run(ipt, ['-w', '5', '-t', table, '-S', EGRESS_CHAIN]).status === 0;
  const jumps = (table: string, chain: string): boolean =>
    run(ipt, ['-w', '5', '-t', table, '-C', chain, '-j', EGRESS_CHAIN]).status === 0;
  const input = [
    '*filter',
    ...(exists('filter') ? [] : [`:${EGRESS_CHAIN} - [0:0]`]),
    ...(jumps('filter', 'FORWARD') ? [] : [`-I FORWARD 1 -j ${EGRESS_CHAIN}`]),
    'COMMIT',
    '*nat',
    ...(exists('nat') ? [] : [`:${EGRESS_CHAIN} - [0:0]`]),
    ...(jumps('nat', 'POSTROUTING') ? [] : [`-A POSTROUTING -j ${EGRESS_CHAIN}`]),
    'COMMIT',
    '',
  ].join('\n');
  const res = restore(input);
  if (res.status !== 0) throw new IptablesError(`failed to install the IPv4 egress chains: ${res.stderr.trim()}`);
}

/** The pod's host rules, in one restore (the chains made first when it finds them missing). */
export function installEgressRules(hostVeth: string, ip: string): void {
  const rules = podEgressRules(hostVeth, ip);
  const input = ['*filter', ...rules.filter, 'COMMIT', '*nat', ...rules.nat, 'COMMIT', ''].join('\n');
  if (restore(input).status === 0) return;
  ensureEgressChains();
  const res = restore(input);
  if (res.status !== 0) throw new IptablesError(`failed to install the IPv4 egress rules: ${res.stderr.trim()}`);
}

/** Every host rule naming this source address, whatever veth it names (DEL may not know it). */
export function egressRulesOf(ip: string): { filter: string[]; nat: string[] } {
  const ipt = iptablesCommand('iptables');
  const of = (table: string): string[] =>
    listed(ipt, ['-t', table, '-S', EGRESS_CHAIN], true).filter((r) => r.includes(` -s ${ip}/32 `));
  return { filter: of('filter'), nat: of('nat') };
}

/** Removes them; none left is fine (DEL and undo are idempotent). */
export function removeEgressRules(ip: string): 'removed' | 'absent' {
  const rules = egressRulesOf(ip);
  if (rules.filter.length + rules.nat.length === 0) return 'absent';
  const del = (r: string): string => r.replace(/^-A /, '-D ');
  const input = ['*filter', ...rules.filter.map(del), 'COMMIT', '*nat', ...rules.nat.map(del), 'COMMIT', ''];
  const res = restore(input.join('\n'));
  if (res.status !== 0) throw new IptablesError(`failed to remove the IPv4 egress rules: ${res.stderr.trim()}`);
  return 'removed';
}

/** The pod's side, first its address: a /32 on its veth end, the source of its routes to the host. */
export async function addEgressAddress(pod: RtNetlinkSocket, podIndex: number, ip: string): Promise<void> {
  const bytes = ipBytes(AF_INET, ip);
  await rtnl(`add ${ip}/32 to the pod veth`, () =>
    pod.newAddress(
      { family: AF_INET, prefixlen: 32, index: podIndex },
      { local: bytes, address: bytes },
      {
        timeout: REQUEST_TIMEOUT_MS,
        flags: CREATE_EXCL,
      },
    ),
  );
}

/**
 * Then the default route via the first host address (on-link through the veth's /32 route to it, see
 * host-veth.ts), and IMDS unreachable, as on the pod's own link.
 */
export async function addEgressRoutes(
  pod: RtNetlinkSocket,
  spec: { readonly podIndex: number; readonly ip: string; readonly hostIp: string },
): Promise<void> {
  const opts = { timeout: REQUEST_TIMEOUT_MS, flags: CREATE_EXCL };
  const route = { family: AF_INET, table: RT_TABLE_MAIN, protocol: 'BOOT', scope: 'UNIVERSE' } as const;
  await rtnl(`add the pod's IPv4 default route via ${spec.hostIp}`, () =>
    pod.newRoute(
      { ...route, dstLen: 0, type: 'UNICAST' },
      { gateway: ipBytes(AF_INET, spec.hostIp), oif: spec.podIndex, prefsrc: ipBytes(AF_INET, spec.ip) },
      opts,
    ),
  );
  await rtnl(`make ${IMDS_ADDRESS} unreachable from the pod`, () =>
    pod.newRoute(
      { ...route, dstLen: 32, type: 'UNREACHABLE' },
      { dst: ipBytes(AF_INET, IMDS_ADDRESS) },
      { ...opts, flags: CREATE_REPLACE },
    ),
  );
}
