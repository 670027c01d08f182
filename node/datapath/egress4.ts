import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { RtNetlinkSocket } from 'netlink/dist/rt/rt.js';
import { formatIpv4, parseCidr } from '../../shared/ipv4.js';
import { attachmentFileName, attachmentTempName } from '../journal/names.js';
import { IptablesError, iptablesCommand, runAsync } from './connmark.js';
import { hostVethName } from './host-veth.js';
import { listRules } from './pod-rules.js';
import { IMDS_ADDRESS } from './port.js';
import { assertIfName } from './rp-filter.js';
import {
  AF_INET,
  CREATE_EXCL,
  CREATE_REPLACE,
  EEXIST,
  errnoOf,
  ipBytes,
  REQUEST_TIMEOUT_MS,
  RT_TABLE_MAIN,
  rtnl,
  rtnlDelete,
} from './rtnl.js';

/**
 * IPv4 egress for IPv6-only pods, as aws-vpc-cni's egress plugin gives it: the pod's end of the host veth gets a
 * link-local IPv4 address, a default route to the host, and the host forwards what it sends out with the node's
 * address (MASQUERADE: the address of the interface the main table sends it out by, the boot ENI, which EC2's
 * source/destination check accepts). The host routes each address only when it arrives on its own pod's veth
 * (a fib rule per pod), and never forwards it to a link-local destination (IMDS answers the node's address).
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

/**
 * Node-wide, made once: the source range from any pod veth is accepted (never towards a link-local address: IMDS
 * answers the node's address) and masqueraded. What ties an address to its pod's veth is the pod's fib rule below.
 */
function nodeEgressInput(jumps: (table: string, chain: string) => boolean): string {
  const from = `-s ${EGRESS4_CIDR} -i vlh+`;
  return [
    '*filter',
    // Declaring the chain in a --noflush restore empties it: rerunning never appends twice.
    `:${EGRESS_CHAIN} - [0:0]`,
    `-A ${EGRESS_CHAIN} ${from} -d ${LINK_LOCAL} -j DROP`,
    `-A ${EGRESS_CHAIN} ${from} -j ACCEPT`,
    ...(jumps('filter', 'FORWARD') ? [] : [`-I FORWARD 1 -j ${EGRESS_CHAIN}`]),
    'COMMIT',
    '*nat',
    `:${EGRESS_CHAIN} - [0:0]`,
    `-A ${EGRESS_CHAIN} -s ${EGRESS4_CIDR} ! -d ${MULTICAST} ! -o vlh+ -j MASQUERADE`,
    ...(jumps('nat', 'POSTROUTING') ? [] : [`-A POSTROUTING -j ${EGRESS_CHAIN}`]),
    'COMMIT',
    '',
  ].join('\n');
}

/**
 * Per pod, over netlink: `from <address> iif <its host veth> lookup main`, before the node-wide
 * `from 169.254.172.0/22 unreachable` guard, so an address is routed only when it arrives on its own pod's veth.
 * Both sit before the NodePort `fwmark` rule (1024), which every new connection from a pod veth carries.
 */
export const EGRESS_RULE_PRIORITY = 1_000;
export const EGRESS_GUARD_PRIORITY = 1_001;
const FR_ACT_TO_TBL = 1;
const FR_ACT_UNREACHABLE = 7;

function egressRule(hostVeth: string, ip: string) {
  return {
    header: { family: AF_INET, srcLen: 32, table: RT_TABLE_MAIN, action: FR_ACT_TO_TBL },
    attrs: { src: ipBytes(AF_INET, ip), iifname: hostVeth, table: RT_TABLE_MAIN, priority: EGRESS_RULE_PRIORITY },
  };
}

/** The pod's rule; an equal one already there is a leftover of this attachment's earlier try (its address). */
export async function addEgressRule(host: RtNetlinkSocket, hostVeth: string, ip: string): Promise<void> {
  assertIfName(hostVeth);
  const rule = egressRule(hostVeth, ip);
  try {
    await host.newRule(rule.header, rule.attrs, { timeout: REQUEST_TIMEOUT_MS, flags: CREATE_EXCL });
  } catch (err) {
    if (errnoOf(err) !== EEXIST)
      await rtnl(`add the egress rule from ${ip} iif ${hostVeth}`, () => Promise.reject(err));
  }
}

export function removeEgressRule(host: RtNetlinkSocket, hostVeth: string, ip: string): Promise<'removed' | 'absent'> {
  const rule = egressRule(hostVeth, ip);
  return rtnlDelete(`delete the egress rule from ${ip} iif ${hostVeth}`, () =>
    host.delRule(rule.header, rule.attrs, { timeout: REQUEST_TIMEOUT_MS }),
  );
}

/** Whether the pod's rule is there (CHECK). */
export async function hasEgressRule(host: RtNetlinkSocket, hostVeth: string, ip: string): Promise<boolean> {
  const rules = await listRules(host);
  return rules.some((r) => r.src === ip && r.iifname === hostVeth && r.priority === EGRESS_RULE_PRIORITY);
}

let installing: Promise<void> | undefined;

/**
 * The node-wide half, by the first IPv6-only pod: the chains, then the rules of addresses claimed before (an
 * agent that kept per-pod iptables rules), then the guard last, so its presence (one dump, no process) says the
 * rest is there. Concurrent first ADDs share one install.
 */
export function ensureNodeEgress(host: RtNetlinkSocket, dir: string): Promise<void> {
  installing ??= installNodeEgress(host, dir).finally(() => {
    installing = undefined;
  });
  return installing;
}

async function installNodeEgress(host: RtNetlinkSocket, dir: string): Promise<void> {
  if ((await listRules(host)).some((r) => r.priority === EGRESS_GUARD_PRIORITY)) return;
  const ipt = iptablesCommand('iptables');
  const has = new Set<string>();
  for (const [table, chain] of [
    ['filter', 'FORWARD'],
    ['nat', 'POSTROUTING'],
  ] as const)
    if ((await runAsync(ipt, ['-w', '5', '-t', table, '-C', chain, '-j', EGRESS_CHAIN])).status === 0)
      has.add(`${table} ${chain}`);
  const res = await runAsync(
    iptablesCommand('iptables-restore'),
    ['-w', '5', '--noflush'],
    nodeEgressInput((t, c) => has.has(`${t} ${c}`)),
  );
  if (res.status !== 0) throw new IptablesError(`failed to install the IPv4 egress chains: ${res.stderr.trim()}`);
  for (const [ip, key] of claimedAddresses(dir)) {
    const [containerId, ifName] = [key.slice(0, key.lastIndexOf('/')), key.slice(key.lastIndexOf('/') + 1)];
    await addEgressRule(host, hostVethName(containerId, ifName), ip);
  }
  try {
    await host.newRule(
      { family: AF_INET, srcLen: range.prefixLength, table: 0, action: FR_ACT_UNREACHABLE },
      { src: ipBytes(AF_INET, formatIpv4(range.network)), priority: EGRESS_GUARD_PRIORITY },
      { timeout: REQUEST_TIMEOUT_MS, flags: CREATE_EXCL },
    );
  } catch (err) {
    if (errnoOf(err) !== EEXIST) await rtnl('add the egress guard rule', () => Promise.reject(err));
  }
}

/** Every address file of the directory with the attachment holding it. */
function claimedAddresses(dir: string): [string, string][] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  return names.flatMap((ip) => {
    const key = readIfThere(join(dir, ip));
    return key === undefined || !key.includes('/') ? [] : [[ip, key] as [string, string]];
  });
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
