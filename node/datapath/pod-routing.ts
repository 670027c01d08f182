import { closeSync } from 'node:fs';
import type { RtNetlinkSocket } from 'netlink/dist/rt/rt.js';
import {
  addPodReturnPath,
  ensureHostConnmark,
  IptablesError,
  POD_RETURN_TABLE,
  removePodReturnRule,
} from './connmark.js';
import { addPodReturnPath6, ensureHostConnmark6 } from './connmark6.js';
import {
  addEgressAddress,
  addEgressRoutes,
  addEgressRule,
  claimEgressAddress,
  ensureNodeEgress,
  findEgressAddress,
  hasEgressRule,
  releaseEgressAddress,
  removeEgressRule,
} from './egress4.js';
import {
  addHostRoute,
  addHostRoute6,
  addPodSideRoutes,
  addPodSideRoutes6,
  addVethLinkLocals,
  createVethPair,
  deleteLinkByName,
  hostAddresses,
  hostVethName,
  mainRoutesVia,
  podVethName,
} from './host-veth.js';
import { NetnsMissingError, NotANetnsError, openNetns } from './netns.js';
import { expectedPodMarkRules, installPodMarks, podMarkRules, removePodMarks } from './pod-marks.js';
import { addPodRule, deletePodRule, listRules, rulesFrom } from './pod-rules.js';
import type { IpvlanMode, PodAddress } from './port.js';
import { addEniRoute, deleteEniRoute, hasPodRoute, tableForDevice, tableRoutes } from './route-tables.js';
import { unfilterPodVeth, validateHostVethByMark } from './rp-filter.js';
import { type AddressFamily, AF_INET, AF_INET6, afOf, type CreateRtnl, indexOfLink, socketInNetns } from './rtnl.js';
import type { UndoStack } from './undo.js';

/**
 * What the pod needs beyond its ipvlan link: in L3/L3S the ENI's table and the pod's rule, and with
 * `hostVeth` the unnumbered veth to the host with its routes and the NodePort connmark. Every step pushes its
 * undo before the next starts, and calls `fault` after it completed (test-only failure injection).
 */
export const ROUTING_STEPS = [
  'add-rule',
  'add-table-route',
  'create-veth',
  'add-host-route',
  'add-pod-routes',
  'add-return-path',
  'add-connmark',
] as const;
/** Steps only an IPv6-only pod's host veth takes (its IPv4 egress); every host veth takes ROUTING_STEPS. */
export const EGRESS_STEPS = ['claim-egress', 'add-egress'] as const;
export type RoutingStep = (typeof ROUTING_STEPS)[number] | (typeof EGRESS_STEPS)[number];

export interface HostVethOptions {
  readonly containerId: string;
  /** Both families: each address family of the pod gets the CIDRs of its own. */
  readonly serviceCidrs: readonly string[];
  /** An IPv6-only pod's IPv4 egress: where the node-unique link-local addresses are claimed (egress4.ts). */
  readonly egress4Dir?: string;
}

/** What ADD asks for beside the ipvlan link (part of the datapath port's PodLinkSpec). */
export interface PodRouting {
  /** The ENI's device index: picks its route table in L3/L3S. */
  readonly deviceIndex: number;
  readonly tableBase: number;
  /** The unnumbered veth to the host; absent: none. */
  readonly hostVeth?: HostVethOptions;
}

export interface PodRoutingSpec {
  readonly mode: IpvlanMode;
  readonly ifName: string;
  /** The pod's address (IPv4, or IPv6 on an `ipv6` node) and its VPC router. */
  readonly podIp: string;
  readonly gateway: string;
  /** A dual pod's IPv6 address beside it. */
  readonly ipv6?: Pick<PodAddress, 'ip' | 'gateway'>;
  /** The ENI's device index: picks its route table. */
  readonly deviceIndex: number;
  readonly tableBase: number;
  /** The ENI's interface in the host namespace. */
  readonly masterIndex: number;
  readonly mtu: number;
  /** Absent: no host veth. */
  readonly hostVeth?: HostVethOptions;
}

/** The full spec from the link's and the routing's parts, once the ENI's interface is known. */
export function podRoutingSpec(
  link: {
    readonly mode: IpvlanMode;
    readonly ifName: string;
    readonly ip: string;
    readonly gateway: string;
    readonly ipv6?: PodAddress;
  },
  routing: PodRouting,
  masterIndex: number,
  mtu: number,
): PodRoutingSpec {
  return {
    mode: link.mode,
    ifName: link.ifName,
    podIp: link.ip,
    gateway: link.gateway,
    ...(link.ipv6 ? { ipv6: { ip: link.ipv6.ip, gateway: link.ipv6.gateway } } : {}),
    deviceIndex: routing.deviceIndex,
    tableBase: routing.tableBase,
    masterIndex,
    mtu,
    ...(routing.hostVeth ? { hostVeth: routing.hostVeth } : {}),
  };
}

export interface RoutingSockets {
  readonly host: RtNetlinkSocket;
  readonly pod: RtNetlinkSocket;
  readonly podNsFd: number;
}

export function needsTable(mode: IpvlanMode): boolean {
  return mode === 'l3' || mode === 'l3s';
}

/** The pod's VPC addresses with their routers: one, or two for a dual pod. */
function podIps(spec: PodRoutingSpec): { ip: string; gateway: string }[] {
  return [{ ip: spec.podIp, gateway: spec.gateway }, ...(spec.ipv6 ? [spec.ipv6] : [])];
}

/** The pod's address of a family, if it has one. */
function podIpOf(spec: PodRoutingSpec, family: typeof AF_INET | typeof AF_INET6): string | undefined {
  return podIps(spec).find((a) => afOf(a.ip) === family)?.ip;
}

/** The service CIDRs of one family. */
function cidrsOf(cidrs: readonly string[], family: typeof AF_INET | typeof AF_INET6): string[] {
  return cidrs.filter((c) => afOf(c.split('/')[0]!) === family);
}

/** What the table setups share: the sockets, the spec, the undo stack and the fault hook. */
interface SetupContext {
  readonly s: RoutingSockets;
  readonly spec: PodRoutingSpec;
  readonly undo: UndoStack;
  readonly fault: (step: RoutingStep) => void;
}

/** What the host veth's setups share beyond it, once the pair exists. */
interface VethContext extends SetupContext {
  readonly hostName: string;
  readonly podName: string;
  readonly pair: { readonly hostIndex: number; readonly podIndex: number };
  readonly v4: string | undefined;
  readonly v6: string | undefined;
  readonly hostIps: readonly string[];
  readonly hostIps6: readonly string[];
  /** An IPv6-only pod's IPv4 egress address, once claimed (claimEgress). */
  egress?: string;
}

/** Each setup does one part, pushes its own undo before the next starts, and then reports its step to `fault`. */
type Setup<C> = (c: C) => Promise<void>;

/** L3/L3S: the pod's `from` rule first, then its route: the route is what keeps the ENI's table alive. */
const TABLE_SETUPS: readonly Setup<SetupContext>[] = [addTableRules, addTableRoutes];
const VETH_SETUPS: readonly Setup<VethContext>[] = [
  claimEgress,
  addHostRoutes,
  addPodRoutes,
  addReturnPath,
  addMarks,
  addEgress,
];

export async function setupPodRouting(
  s: RoutingSockets,
  spec: PodRoutingSpec,
  undo: UndoStack,
  fault: (step: RoutingStep) => void,
): Promise<void> {
  const c: SetupContext = { s, spec, undo, fault };
  if (needsTable(spec.mode)) for (const setup of TABLE_SETUPS) await setup(c);
  if (!spec.hostVeth) return;
  const v = await createHostVeth(c, spec.hostVeth);
  for (const setup of VETH_SETUPS) await setup(v);
}

async function addTableRules({ s, spec, undo, fault }: SetupContext): Promise<void> {
  const table = tableForDevice(spec.tableBase, spec.deviceIndex);
  for (const { ip } of podIps(spec)) {
    await addPodRule(s.host, { podIp: ip, table });
    undo.push('add-rule', async () => {
      await deletePodRule(s.host, { podIp: ip, table });
    });
  }
  fault('add-rule');
}

async function addTableRoutes({ s, spec, undo, fault }: SetupContext): Promise<void> {
  const table = tableForDevice(spec.tableBase, spec.deviceIndex);
  for (const { ip, gateway } of podIps(spec)) {
    undo.push('add-table-route', async () => {
      await deleteEniRoute(s.host, { table, podIp: ip });
    });
    await addEniRoute(s.host, { table, gateway, masterIndex: spec.masterIndex, podIp: ip });
  }
  fault('add-table-route');
}

async function createHostVeth(c: SetupContext, hostVeth: HostVethOptions): Promise<VethContext> {
  const { s, spec, undo } = c;
  const hostName = hostVethName(hostVeth.containerId, spec.ifName);
  const podName = podVethName(spec.ifName);
  const v6 = podIpOf(spec, AF_INET6);
  const hostIps = await hostAddresses(s.host);
  const hostIps6 = v6 ? await hostAddresses(s.host, AF_INET6) : [];
  // Pushed before the create: a create that fails half-way (host end made, peer lookup failed) is cleaned too.
  undo.push('create-veth', async () => {
    await deleteLinkByName(s.host, hostName);
  });
  const pair = await createVethPair(s.host, s.pod, { hostName, podName, podNsFd: s.podNsFd, mtu: spec.mtu });
  // Both ends carry traffic whose route back leaves elsewhere, and neither has an address (see rp-filter.ts).
  validateHostVethByMark(hostName);
  unfilterPodVeth(s.podNsFd, podName);
  if (v6) await addVethLinkLocals(s.host, s.pod, pair);
  c.fault('create-veth');
  return { ...c, hostName, podName, pair, v4: podIpOf(spec, AF_INET), v6, hostIps, hostIps6 };
}

/** An IPv6-only pod reaches IPv4 through the host, from a link-local address of its own (egress4.ts). */
async function claimEgress(v: VethContext): Promise<void> {
  const dir = v.v4 === undefined ? v.spec.hostVeth?.egress4Dir : undefined;
  if (dir === undefined) return;
  const { containerId } = v.spec.hostVeth!;
  // Pushed first: a claim that fails half-way (its index written, no address) is cleaned too.
  v.undo.push('claim-egress', () => releaseEgressAddress(dir, containerId, v.spec.ifName));
  v.egress = claimEgressAddress(dir, containerId, v.spec.ifName);
  await addEgressAddress(v.s.pod, v.pair.podIndex, v.egress);
  v.fault('claim-egress');
}

/** The host's /32 (/128) to the pod; routes on either end go with the pair: their undo is the veth's. */
async function addHostRoutes(v: VethContext): Promise<void> {
  const src4 = v.v4 ?? v.egress;
  if (src4 !== undefined) await addHostRoute(v.s.host, { hostIndex: v.pair.hostIndex, podIp: src4 });
  if (v.v6) await addHostRoute6(v.s.host, { hostIndex: v.pair.hostIndex, podIp: v.v6 });
  v.fault('add-host-route');
}

async function addPodRoutes(v: VethContext): Promise<void> {
  const src4 = v.v4 ?? v.egress;
  const cidrs = v.spec.hostVeth!.serviceCidrs;
  const podIndex = v.pair.podIndex;
  if (src4 !== undefined)
    await addPodSideRoutes(v.s.pod, {
      podIndex,
      podIp: src4,
      hostIps: v.hostIps,
      serviceCidrs: cidrsOf(cidrs, AF_INET),
    });
  if (v.v6)
    await addPodSideRoutes6(v.s.pod, {
      podIndex,
      podIp: v.v6,
      hostIps: v.hostIps6,
      serviceCidrs: cidrsOf(cidrs, AF_INET6),
    });
  v.fault('add-pod-routes');
}

/** NodePort reaches the pod's VPC addresses only: an egress address gets no return path of its own. */
function returnsV4(v: VethContext): boolean {
  return v.v4 !== undefined && v.hostIps[0] !== undefined;
}

async function addReturnPath(v: VethContext): Promise<void> {
  const returnV4 = returnsV4(v);
  if (!returnV4 && !v.v6) return;
  v.undo.push('add-return-path', async () => {
    if (returnV4) await removePodReturnRule(v.s.pod, AF_INET);
    if (v.v6) await removePodReturnRule(v.s.pod, AF_INET6);
  });
  if (returnV4) await addPodReturnPath(v.s.pod, { podIndex: v.pair.podIndex, hostIp: v.hostIps[0]! });
  if (v.v6) await addPodReturnPath6(v.s.pod, v.pair.podIndex);
  v.fault('add-return-path');
}

/** The pod's marks over nf_tables netlink (pod-marks.ts), and the node-wide half, installed once per node. */
async function addMarks(v: VethContext): Promise<void> {
  const families: AddressFamily[] = [];
  if (returnsV4(v)) families.push(AF_INET);
  if (v.v6) families.push(AF_INET6);
  if (families.length === 0) return;
  v.undo.push('add-connmark', () => removePodMarks(v.s.podNsFd, v.podName, families));
  await installPodMarks(v.s.podNsFd, v.podName, families);
  // The IPv4 node-wide part also for an egress address: its drop of non-service traffic covers other sources.
  if ((v.v4 ?? v.egress) !== undefined && v.hostIps[0] !== undefined) await ensureHostConnmark(v.s.host, v.hostIps);
  if (v.v6) await ensureHostConnmark6(v.s.host);
  v.fault('add-connmark');
}

async function addEgress(v: VethContext): Promise<void> {
  const ip = v.egress;
  if (ip === undefined) return;
  const hostIp = v.hostIps[0];
  if (hostIp === undefined) throw new IptablesError('the host has no IPv4 address for IPv4 egress');
  await ensureNodeEgress(v.s.host, v.spec.hostVeth!.egress4Dir!);
  v.undo.push('add-egress', async () => {
    await removeEgressRule(v.s.host, v.hostName, ip);
  });
  await addEgressRule(v.s.host, v.hostName, ip);
  await addEgressRoutes(v.s.pod, { podIndex: v.pair.podIndex, ip, hostIp });
  v.fault('add-egress');
}

/** CHECK's half: every problem found, empty when the routing is what ADD made. */
export async function inspectPodRouting(s: RoutingSockets, spec: PodRoutingSpec): Promise<string[]> {
  const problems: string[] = [];
  if (needsTable(spec.mode)) {
    const table = tableForDevice(spec.tableBase, spec.deviceIndex);
    for (const { ip, gateway } of podIps(spec)) {
      const family = afOf(ip);
      const rules = rulesFrom(await listRules(s.host, family), ip);
      if (!rules.some((r) => r.table === table)) problems.push(`no rule from ${ip} lookup ${table}`);
      const stray = rules.filter((r) => r.table !== table).map((r) => r.table);
      if (stray.length > 0) problems.push(`rules from ${ip} also point at table(s) ${stray.join(', ')}`);
      const route = { table, gateway, masterIndex: spec.masterIndex, podIp: ip };
      if (!hasPodRoute(await tableRoutes(s.host, table, family), route))
        problems.push(`table ${table} has no default route via ${gateway} for ${ip}`);
    }
  }
  if (spec.hostVeth) {
    const hostName = hostVethName(spec.hostVeth.containerId, spec.ifName);
    const podName = podVethName(spec.ifName);
    const hostIndex = await indexOfLink(s.host, hostName);
    const podIndex = await indexOfLink(s.pod, podName);
    if (hostIndex === undefined) problems.push(`host veth ${hostName} is missing`);
    if (podIndex === undefined) problems.push(`pod veth ${podName} is missing`);
    const v4 = podIpOf(spec, AF_INET);
    const v6 = podIpOf(spec, AF_INET6);
    const egressDir = v4 === undefined ? spec.hostVeth.egress4Dir : undefined;
    const egress = egressDir ? findEgressAddress(egressDir, spec.hostVeth.containerId, spec.ifName) : undefined;
    if (egressDir && !egress) problems.push(`no IPv4 egress address is recorded for ${podName}`);
    const routed: [string, number, string][] = [
      ...((v4 ?? egress) ? [[`${v4 ?? egress}/32`, AF_INET, v4 ?? egress] as [string, number, string]] : []),
      ...(v6 ? [[`${v6}/128`, AF_INET6, v6] as [string, number, string]] : []),
    ];
    if (hostIndex !== undefined)
      for (const [dst, family, ip] of routed)
        if (!(await mainRoutesVia(s.host, hostIndex, family as typeof AF_INET)).some((r) => r.dst === dst))
          problems.push(`the host has no route to ${ip} via ${hostName}`);
    if (podIndex !== undefined) {
      const podRoutes = [
        ...(await mainRoutesVia(s.pod, podIndex)),
        ...(v6 ? await mainRoutesVia(s.pod, podIndex, AF_INET6) : []),
      ].map((r) => r.dst);
      const families = [...((v4 ?? egress) ? [AF_INET] : []), ...(v6 ? [AF_INET6] : [])] as const;
      for (const cidr of spec.hostVeth.serviceCidrs)
        if (families.includes(afOf(cidr.split('/')[0]!)) && !podRoutes.includes(cidr))
          problems.push(`the pod has no route to service CIDR ${cidr} via ${podName}`);
      if (egress && !podRoutes.includes('0.0.0.0/0'))
        problems.push(`the pod has no IPv4 default route via ${podName} for its egress`);
      if (egress && !(await hasEgressRule(s.host, hostName, egress)))
        problems.push(`the host does not route ${podName}'s egress address ${egress} from its veth`);
      if (v4 !== undefined) {
        if (!(await tableRoutes(s.pod, POD_RETURN_TABLE)).some((r) => r.oif === podIndex))
          problems.push(`the pod's return table ${POD_RETURN_TABLE} does not lead to ${podName}`);
        if (!sameRules(await podMarkRules(s.podNsFd, podName, AF_INET), expectedPodMarkRules(podName)))
          problems.push(`the pod's connmark rules for ${podName} are missing or changed`);
      }
      if (v6) {
        if (!(await tableRoutes(s.pod, POD_RETURN_TABLE, AF_INET6)).some((r) => r.oif === podIndex))
          problems.push(`the pod's IPv6 return table ${POD_RETURN_TABLE} does not lead to ${podName}`);
        if (!sameRules(await podMarkRules(s.podNsFd, podName, AF_INET6), expectedPodMarkRules(podName)))
          problems.push(`the pod's IPv6 connmark rules for ${podName} are missing or changed`);
      }
    }
  }
  return problems;
}

function sameRules(found: readonly string[], expected: readonly string[]): boolean {
  return found.length === expected.length && found.every((r, i) => r === expected[i]);
}

export interface PodNetns {
  readonly socket: RtNetlinkSocket;
  readonly nsFd: number;
}

/** Runs `fn` with a socket in the pod's netns; undefined (fn not run) when the netns is gone or is not one. */
export async function withPodNetns<T>(
  create: CreateRtnl,
  netnsPath: string,
  fn: (pod: PodNetns) => Promise<T>,
): Promise<T | undefined> {
  let nsFd: number;
  try {
    nsFd = openNetns(netnsPath);
  } catch (err) {
    if (err instanceof NetnsMissingError || err instanceof NotANetnsError) return undefined;
    throw err;
  }
  let socket: RtNetlinkSocket | undefined;
  try {
    socket = socketInNetns(create, nsFd);
    return await fn({ socket, nsFd });
  } finally {
    socket?.socket.close();
    closeSync(nsFd);
  }
}
