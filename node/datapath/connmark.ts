import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { RtNetlinkSocket } from 'netlink/dist/rt/rt.js';
import { VpcLeaseError } from '../../shared/errors.js';
import { interfacesWith } from './host-veth.js';
import { inNetns } from './native.js';
import { listRules } from './pod-rules.js';
import { loosenRpFilter } from './rp-filter.js';
import {
  type AddressFamily,
  AF_INET,
  AF_INET6,
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
 * NodePort (and hostPort) return traffic. A connection that reaches the pod through the host — kube-proxy's
 * DNAT on the host, then the host veth — must be answered through the host too, or the reply leaves through the
 * ipvlan link with the pod's address and never meets the conntrack entry that would undo the DNAT.
 *
 * - In the pod: connections that arrive on the host veth get connmark 0x80; replies restore it as the packet
 *   mark, and `fwmark 0x80/0x80 lookup 117` sends them to a table whose default route is the host veth.
 * - On the host (L3/L3S, where ipvlan routes the pod's packets in the host namespace): connections arriving on
 *   a non-pod interface for a local address get the same mark, packets from the pod veths restore it, and
 *   `fwmark 0x80/0x80 lookup main` (priority 1024, before the pods' `from <ip>` rules) keeps the reply on the
 *   host's path instead of the ENI's table. This part is node-wide and installed once; it is never removed per
 *   pod, since every pod shares it.
 *
 * iptables only for the node-wide part, with fixed arguments through execFile-style spawns (no shell).
 */
export const CONNMARK = 0x80;
export const HOST_FWMARK_RULE_PRIORITY = 1_024;
export const POD_RETURN_TABLE = 117;
export const POD_FWMARK_RULE_PRIORITY = 100;
const HOST_CHAIN = 'VPC-LEASE-NODEPORT';
const FORWARD_CHAIN = 'VPC-LEASE-FORWARD';
const SNAT_CHAIN = 'VPC-LEASE-SNAT';
const HOST_VETH_PREFIX = 'vlh+';
/** Far inside the runtime's own CNI timeout; a loaded or emulated node can take seconds to start iptables. */
const SPAWN_TIMEOUT_MS = 30_000;
const SAFE_PATH = '/usr/sbin:/usr/bin:/sbin:/bin';

export class IptablesError extends VpcLeaseError {}

/**
 * The argv prefixes that run iptables and iptables-restore. The plugin uses the host's (whichever backend the
 * host's alternatives select); the agent sets its image's multi binary in the host's backend (useIptables).
 */
export interface IptablesCommands {
  readonly iptables: readonly string[];
  readonly restore: readonly string[];
}
let chosen: IptablesCommands | undefined;

/** Set once at agent start; undefined returns to the host's binaries. */
export function useIptables(commands: IptablesCommands | undefined): void {
  chosen = commands;
}

/** The four tools: IPv6 (connmark6.ts, egress4.ts) takes the same binary, or the agent's multi binary, as IPv4. */
export type XtablesTool = 'iptables' | 'iptables-restore' | 'ip6tables' | 'ip6tables-restore';

export function iptablesCommand(name: XtablesTool): readonly string[] {
  if (chosen?.iptables.length === 2 && name.startsWith('ip6')) return [chosen.iptables[0]!, name];
  if (chosen) return name.endsWith('restore') ? chosen.restore : chosen.iptables;
  for (const dir of ['/usr/sbin', '/sbin', '/usr/bin', '/bin']) {
    const path = `${dir}/${name}`;
    if (existsSync(path)) return [path];
  }
  throw new IptablesError(`${name} is not installed (needed for the NodePort connmark rules)`);
}

/** Most stderr kept from an iptables run: enough for its error message. */
const STDERR_MAX_BYTES = 4_096;

/**
 * `run` without blocking the event loop: the node-wide installs happen on the request path of a node's first
 * pods, while the agent serves others.
 */
export function runAsync(
  command: readonly string[],
  args: readonly string[],
  input?: string,
): Promise<{ status: number; stderr: string }> {
  const [file, ...first] = command as [string, ...string[]];
  const child = spawn(file, [...first, ...args], {
    stdio: ['pipe', 'ignore', 'pipe'],
    env: { PATH: SAFE_PATH },
    timeout: SPAWN_TIMEOUT_MS,
  });
  child.stdin?.on('error', () => undefined); // a child that failed to start reports through 'error' below
  child.stdin?.end(input ?? '');
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    if (stderr.length < STDERR_MAX_BYTES) stderr += chunk;
  });
  return new Promise((resolve, reject) => {
    child.once('error', (err) => reject(new IptablesError(`failed to run ${file}: ${err.message}`, { cause: err })));
    child.once('close', (code) => resolve({ status: code ?? 1, stderr }));
  });
}

/** Lists the mangle rules of a namespace as iptables-save prints them (CHECK and tests). */
export function mangleRules(podNsFd?: number): string[] {
  const read = (): string[] => listed(iptablesCommand('iptables'), ['-t', 'mangle', '-S']);
  return podNsFd === undefined ? read() : inNetns(podNsFd, read);
}

/** The `-A` lines of an `-S` listing, by either family's tool; a missing chain lists nothing when `missingOk`. */
export function listed(command: readonly string[], args: readonly string[], missingOk = false): string[] {
  const [file, ...first] = command as [string, ...string[]];
  const out = spawnSync(file, [...first, '-w', '5', ...args], {
    encoding: 'utf8',
    timeout: SPAWN_TIMEOUT_MS,
    env: { PATH: SAFE_PATH },
  });
  if (out.error) throw new IptablesError(`failed to run ${file}: ${out.error.message}`, { cause: out.error });
  if (out.status !== 0 && !missingOk) throw new IptablesError(`failed to list ${args.join(' ')}: ${out.stderr}`);
  return out.status === 0 ? out.stdout.split('\n').filter((l) => l.startsWith('-A ')) : [];
}

/** The pod's return path: `fwmark 0x80/0x80 lookup 117`, and table 117's default route via the host veth. */
export async function addPodReturnPath(
  pod: RtNetlinkSocket,
  spec: { readonly podIndex: number; readonly hostIp: string },
): Promise<void> {
  await rtnl('add the pod return route through the host veth', () =>
    pod.newRoute(
      { family: AF_INET, dstLen: 0, table: POD_RETURN_TABLE, protocol: 'BOOT', scope: 'UNIVERSE', type: 'UNICAST' },
      { table: POD_RETURN_TABLE, gateway: ipBytes(AF_INET, spec.hostIp), oif: spec.podIndex },
      { timeout: REQUEST_TIMEOUT_MS, flags: CREATE_REPLACE },
    ),
  );
  await addPodFwmarkRule(pod, AF_INET);
}

/** The pod's `fwmark 0x80/0x80 lookup 117` in one family; a second attachment in the same pod shares it. */
export function addPodFwmarkRule(pod: RtNetlinkSocket, family: AddressFamily): Promise<void> {
  return addMarkRule(pod, markRule(family, POD_RETURN_TABLE, POD_FWMARK_RULE_PRIORITY), 'pod');
}

export async function removePodReturnRule(pod: RtNetlinkSocket, family: AddressFamily): Promise<'removed' | 'absent'> {
  const rule = markRule(family, POD_RETURN_TABLE, POD_FWMARK_RULE_PRIORITY);
  return rtnlDelete(`delete the pod ${familyWord(family)}fwmark rule`, () =>
    pod.delRule(rule.header, rule.attrs, { timeout: REQUEST_TIMEOUT_MS }),
  );
}

/** The host's `fwmark 0x80/0x80 lookup main` (priority 1024) in one family; an ADD racing this one may add it first. */
export function addHostFwmarkRule(host: RtNetlinkSocket, family: AddressFamily): Promise<void> {
  return addMarkRule(host, markRule(family, RT_TABLE_MAIN, HOST_FWMARK_RULE_PRIORITY), 'host');
}

function markRule(family: AddressFamily, table: number, priority: number) {
  return {
    family,
    header: { family, table, action: 1 },
    attrs: { fwmark: CONNMARK, fwmask: CONNMARK, table, priority },
  };
}

function familyWord(family: AddressFamily): string {
  return family === AF_INET6 ? 'IPv6 ' : '';
}

/** Adds a mark rule with CREATE_EXCL, so an equal rule already there is the only refusal taken as done. */
async function addMarkRule(socket: RtNetlinkSocket, rule: ReturnType<typeof markRule>, side: string): Promise<void> {
  try {
    await socket.newRule(rule.header, rule.attrs, { timeout: REQUEST_TIMEOUT_MS, flags: CREATE_EXCL });
  } catch (err) {
    if (errnoOf(err) !== EEXIST)
      await rtnl(`add the ${side} ${familyWord(rule.family)}fwmark rule`, () => Promise.reject(err));
  }
}

/**
 * The node-wide half (every mode with the host veth): installed by the first ADD that needs it. The fwmark rule
 * goes last, so its presence (one netlink dump, no spawn) says the iptables part is there too; a crash in between
 * only means the next ADD installs the chains again (their content is rewritten, not appended).
 *
 * Beside the NodePort mark, it handles what pods send through the host veth, which is service traffic only:
 * - connections entering from a pod veth get the same mark, so they route by the main table (never by a pod's
 *   `from <ip>` rule into its ENI) and, when kube-proxy's DNAT sends them off the node, leave masqueraded to the
 *   node's address through the boot ENI. Without that, EC2's source/destination check drops them (the pod's
 *   address on the boot ENI), or the backend's reply reaches the pod straight through ipvlan, bypassing the
 *   conntrack entry that undoes the DNAT;
 * - anything else a pod forwards through its veth is dropped: only DNATed (service) connections may pass, so a
 *   pod cannot reach IMDS, or anything else, with the node's address.
 */
export function ensureHostConnmark(
  host: RtNetlinkSocket,
  hostIps: readonly string[],
): Promise<'installed' | 'present'> {
  installing4 ??= installHostConnmark(host, hostIps).finally(() => {
    installing4 = undefined;
  });
  return installing4;
}
/** Concurrent first ADDs share one install. */
let installing4: Promise<'installed' | 'present'> | undefined;

async function installHostConnmark(
  host: RtNetlinkSocket,
  hostIps: readonly string[],
): Promise<'installed' | 'present'> {
  const rules = await listRules(host);
  if (rules.some((r) => r.fwmark === CONNMARK && r.priority === HOST_FWMARK_RULE_PRIORITY)) return 'present';
  // Masqueraded service replies come back on the host's own interfaces (the boot ENI) addressed to a pod whose
  // `from` rule points elsewhere: those interfaces need loose reverse-path filtering (rp-filter.ts).
  for (const name of await interfacesWith(host, hostIps)) loosenRpFilter(name);
  const input = hostChainsInput(await jumpsPresent(iptablesCommand('iptables')));
  const res = await runAsync(iptablesCommand('iptables-restore'), ['-w', '5', '--noflush'], input);
  if (res.status !== 0) throw new IptablesError(`failed to install the host connmark rules: ${res.stderr.trim()}`);
  await addHostFwmarkRule(host, AF_INET);
  return 'installed';
}

/** Which of the three node-wide jumps are there already (`-C`, one run each), for hostChainsInput. */
export async function jumpsPresent(
  iptables: readonly string[],
): Promise<(table: string, chain: string, target: string) => boolean> {
  const jumps = [
    ['mangle', 'PREROUTING', HOST_CHAIN],
    ['filter', 'FORWARD', FORWARD_CHAIN],
    ['nat', 'POSTROUTING', SNAT_CHAIN],
  ] as const;
  const present = new Set<string>();
  for (const [table, chain, target] of jumps)
    if ((await runAsync(iptables, ['-w', '5', '-t', table, '-C', chain, '-j', target])).status === 0)
      present.add(`${table} ${chain} ${target}`);
  return (table, chain, target) => present.has(`${table} ${chain} ${target}`);
}

/** The node-wide chains as iptables-restore input, the same for both families; `has` says a jump is there. */
export function hostChainsInput(has: (table: string, chain: string, target: string) => boolean): string {
  const hex = `0x${CONNMARK.toString(16)}`;
  const mark = `${hex}/${hex}`;
  return [
    '*mangle',
    // Declaring a user chain in a --noflush restore creates it or empties it: rerunning never appends twice.
    `:${HOST_CHAIN} - [0:0]`,
    `-A ${HOST_CHAIN} ! -i ${HOST_VETH_PREFIX} -m addrtype --dst-type LOCAL --limit-iface-in -j CONNMARK --set-xmark ${mark}`,
    `-A ${HOST_CHAIN} -i ${HOST_VETH_PREFIX} -m conntrack --ctstate NEW -j CONNMARK --set-xmark ${mark}`,
    `-A ${HOST_CHAIN} -i ${HOST_VETH_PREFIX} -j CONNMARK --restore-mark --nfmask ${hex} --ctmask ${hex}`,
    ...(has('mangle', 'PREROUTING', HOST_CHAIN) ? [] : [`-A PREROUTING -j ${HOST_CHAIN}`]),
    'COMMIT',
    '*filter',
    `:${FORWARD_CHAIN} - [0:0]`,
    `-A ${FORWARD_CHAIN} -i ${HOST_VETH_PREFIX} -m conntrack --ctstate RELATED -j RETURN`,
    `-A ${FORWARD_CHAIN} -i ${HOST_VETH_PREFIX} -m conntrack ! --ctstate DNAT -j DROP`,
    ...(has('filter', 'FORWARD', FORWARD_CHAIN) ? [] : [`-I FORWARD -j ${FORWARD_CHAIN}`]),
    'COMMIT',
    '*nat',
    `:${SNAT_CHAIN} - [0:0]`,
    `-A ${SNAT_CHAIN} -m connmark --mark ${mark} -m conntrack --ctstate DNAT ! -o ${HOST_VETH_PREFIX} -j MASQUERADE`,
    ...(has('nat', 'POSTROUTING', SNAT_CHAIN) ? [] : [`-A POSTROUTING -j ${SNAT_CHAIN}`]),
    'COMMIT',
    '',
  ].join('\n');
}
