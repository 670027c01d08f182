import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { RtNetlinkSocket } from 'netlink/dist/rt/rt.js';
import { formatIpv4, parseCidr } from '../../shared/ipv4.js';
import { attachmentFileName, attachmentTempName } from '../journal/names.js';
import { IptablesError, iptablesCommand, listed, run } from './connmark.js';
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

/** Beside the addresses' directory: one file per attachment naming the one address it may hold. */
function indexFile(dir: string, containerId: string, ifName: string): string {
  return join(`${dir}-index`, attachmentFileName(containerId, ifName));
}

/** A file's text; undefined when it does not exist (released, or never written). */
function readIfThere(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

function holds(dir: string, ip: string, key: string): boolean {
  return readIfThere(join(dir, ip)) === key;
}

/** The address this attachment holds, if any (a repeated ADD, CHECK, DEL): its index, then that address's file. */
export function findEgressAddress(dir: string, containerId: string, ifName: string): string | undefined {
  const ip = readIfThere(indexFile(dir, containerId, ifName));
  return ip !== undefined && holds(dir, ip, attachmentKey(containerId, ifName)) ? ip : undefined;
}

/** The address file, created exclusively (the lock between plugin processes, as host-local's); true if ours. */
function tryClaim(dir: string, ip: string, key: string): boolean {
  try {
    writeFileSync(join(dir, ip), key, { flag: 'wx', mode: 0o600 });
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    return holds(dir, ip, key); // a claim this attachment made before it crashed
  }
}

/** Where the attachment's search starts: a hash of it, so concurrent ADDs rarely probe the same files. */
export function egressSearchStart(containerId: string, ifName: string): number {
  return createHash('sha256').update(attachmentKey(containerId, ifName)).digest().readUInt32BE(0) % SLOTS;
}

/**
 * A node-unique address for the attachment, found with one read when it has one. Each candidate is written to
 * the attachment's index (atomically, by rename) before its address file is created, so whatever a crash leaves,
 * the index names the only address the attachment can hold: the next ADD reuses it and DEL releases it.
 */
export function claimEgressAddress(dir: string, containerId: string, ifName: string): string {
  const index = indexFile(dir, containerId, ifName);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  mkdirSync(dirname(index), { recursive: true, mode: 0o700 });
  const key = attachmentKey(containerId, ifName);
  const recorded = readIfThere(index);
  if (recorded !== undefined && tryClaim(dir, recorded, key)) return recorded;
  const start = egressSearchStart(containerId, ifName);
  for (let i = 0; i < SLOTS; i++) {
    const ip = formatIpv4(range.network + 1 + ((start + i) % SLOTS));
    if (ip === recorded || existsSync(join(dir, ip))) continue;
    const tmp = join(dirname(index), attachmentTempName(containerId, ifName));
    writeFileSync(tmp, ip, { mode: 0o600 });
    renameSync(tmp, index);
    if (tryClaim(dir, ip, key)) return ip;
  }
  throw new IptablesError(`no free IPv4 egress address in ${EGRESS4_CIDR}`);
}

/** Gives the attachment's address back (only if it holds it), then its index: DEL, GC and ADD's undo. */
export function releaseEgressAddress(dir: string, containerId: string, ifName: string): void {
  const index = indexFile(dir, containerId, ifName);
  const ip = readIfThere(index);
  if (ip !== undefined && holds(dir, ip, attachmentKey(containerId, ifName))) rmSync(join(dir, ip), { force: true });
  rmSync(index, { force: true });
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

function egressChainExists(table: 'filter' | 'nat'): boolean {
  return run(iptablesCommand('iptables'), ['-w', '5', '-t', table, '-S', EGRESS_CHAIN]).status === 0;
}

/**
 * Creates the chain with `-N`, which fails on an existing chain and so never empties one: two first ADDs that both
 * found it missing would otherwise have the second's restore declaration flush the rules the first put in it.
 */
export function createEgressChain(table: 'filter' | 'nat'): void {
  const res = run(iptablesCommand('iptables'), ['-w', '5', '-t', table, '-N', EGRESS_CHAIN]);
  if (res.status !== 0 && !egressChainExists(table))
    throw new IptablesError(`failed to create ${EGRESS_CHAIN} in ${table}: ${res.stderr.trim()}`);
}

/**
 * The node-wide chains, made once: the filter chain first in FORWARD (ahead of connmark.ts's VPC-LEASE-FORWARD,
 * which drops whatever a pod veth sends that is not service traffic), the nat chain in POSTROUTING.
 */
function ensureEgressChains(): void {
  const ipt = iptablesCommand('iptables');
  const jumps = (table: string, chain: string): boolean =>
    run(ipt, ['-w', '5', '-t', table, '-C', chain, '-j', EGRESS_CHAIN]).status === 0;
  for (const table of ['filter', 'nat'] as const) if (!egressChainExists(table)) createEgressChain(table);
  const input = [
    '*filter',
    ...(jumps('filter', 'FORWARD') ? [] : [`-I FORWARD 1 -j ${EGRESS_CHAIN}`]),
    'COMMIT',
    '*nat',
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
