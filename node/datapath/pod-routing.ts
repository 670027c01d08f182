import { closeSync } from 'node:fs';
import type { RtNetlinkSocket } from 'netlink/dist/rt/rt.js';
import {
  addPodReturnPath,
  ensureHostConnmark,
  IptablesError,
  mangleRules,
  POD_RETURN_TABLE,
  removePodConnmark,
  removePodReturnRule,
  startInstallPodConnmark,
} from './connmark.js';
import {
  addPodReturnPath6,
  ensureHostConnmark6,
  mangleRules6,
  removePodConnmark6,
  startInstallPodConnmark6,
} from './connmark6.js';
import {
  addEgressAddress,
  addEgressRoutes,
  claimEgressAddress,
  egressRulesOf,
  findEgressAddress,
  installEgressRules,
  releaseEgressAddress,
  removeEgressRules,
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
import { addPodRule, deletePodRule, listRules, rulesFrom } from './pod-rules.js';
import type { IpvlanMode, PodAddress } from './port.js';
import { addEniRoute, deleteEniRoute, hasPodRoute, tableForDevice, tableRoutes } from './route-tables.js';
import { unfilterPodVeth, validateHostVethByMark } from './rp-filter.js';
import { AF_INET, AF_INET6, afOf, type CreateRtnl, indexOfLink, socketInNetns } from './rtnl.js';
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

export async function setupPodRouting(
  s: RoutingSockets,
  spec: PodRoutingSpec,
  undo: UndoStack,
  fault: (step: RoutingStep) => void,
): Promise<void> {
  if (needsTable(spec.mode)) {
    const table = tableForDevice(spec.tableBase, spec.deviceIndex);
    // Rule first, route second, and undo in reverse: the pod's own route is what keeps its table alive.
    for (const { ip } of podIps(spec)) {
      await addPodRule(s.host, { podIp: ip, table });
      undo.push('add-rule', async () => {
        await deletePodRule(s.host, { podIp: ip, table });
      });
    }
    fault('add-rule');
    for (const { ip, gateway } of podIps(spec)) {
      undo.push('add-table-route', async () => {
        await deleteEniRoute(s.host, { table, podIp: ip });
      });
      await addEniRoute(s.host, { table, gateway, masterIndex: spec.masterIndex, podIp: ip });
    }
    fault('add-table-route');
  }
  if (!spec.hostVeth) return;

  const hostName = hostVethName(spec.hostVeth.containerId, spec.ifName);
  const podName = podVethName(spec.ifName);
  const v4 = podIpOf(spec, AF_INET);
  const v6 = podIpOf(spec, AF_INET6);
  const hostIps = await hostAddresses(s.host);
  const hostIps6 = v6 ? await hostAddresses(s.host, AF_INET6) : [];
  // Pushed before the create: a create that fails half-way (host end made, peer lookup failed) is cleaned too.
  undo.push('create-veth', async () => {
    await deleteLinkByName(s.host, hostName);
  });
  const pair = await createVethPair(s.host, s.pod, { hostName, podName, podNsFd: s.podNsFd, mtu: spec.mtu });
  const firstHostIp = hostIps[0];
  // NodePort reaches the pod's VPC addresses only: an egress address gets no return path of its own.
  const returnV4 = v4 !== undefined && firstHostIp !== undefined;
  // The pod's IPv4 mark rules name only its veth: their iptables run overlaps the netlink steps below (and, in
  // the agent, other pods' calls) and is awaited before this ADD can succeed. Its undo waits for it to end first.
  const marks = returnV4 ? startInstallPodConnmark(s.podNsFd, podName) : undefined;
  if (marks) {
    marks.catch(() => undefined); // awaited below, or by the undo when an earlier step fails
    undo.push('add-connmark', async () => {
      await marks.catch(() => undefined);
      removePodConnmark(s.podNsFd, podName);
    });
  }
  // The IPv6 marks alike, beside the IPv4 ones: a dual pod's two runs overlap each other too.
  const marks6 = v6 ? startInstallPodConnmark6(s.podNsFd, podName) : undefined;
  if (marks6) {
    marks6.catch(() => undefined);
    undo.push('add-connmark', async () => {
      await marks6.catch(() => undefined);
      removePodConnmark6(s.podNsFd, podName);
    });
  }
  // Both ends carry traffic whose route back leaves elsewhere, and neither has an address (see rp-filter.ts).
  validateHostVethByMark(hostName);
  unfilterPodVeth(s.podNsFd, podName);
  if (v6) await addVethLinkLocals(s.host, s.pod, pair);
  fault('create-veth');

  // An IPv6-only pod reaches IPv4 through the host, from a link-local address of its own (egress4.ts).
  const egressDir = v4 === undefined ? spec.hostVeth.egress4Dir : undefined;
  let egress: string | undefined;
  if (egressDir !== undefined) {
    const { containerId } = spec.hostVeth;
    // Pushed first: a claim that fails half-way (its index written, no address) is cleaned too.
    undo.push('claim-egress', () => releaseEgressAddress(egressDir, containerId, spec.ifName));
    const ip = claimEgressAddress(egressDir, containerId, spec.ifName);
    egress = ip;
    await addEgressAddress(s.pod, pair.podIndex, ip);
    fault('claim-egress');
  }
  const src4 = v4 ?? egress;
  // Routes on either end go with the pair: their undo is the veth's.
  if (src4 !== undefined) await addHostRoute(s.host, { hostIndex: pair.hostIndex, podIp: src4 });
  if (v6) await addHostRoute6(s.host, { hostIndex: pair.hostIndex, podIp: v6 });
  fault('add-host-route');
  if (src4 !== undefined)
    await addPodSideRoutes(s.pod, {
      podIndex: pair.podIndex,
      podIp: src4,
      hostIps,
      serviceCidrs: cidrsOf(spec.hostVeth.serviceCidrs, AF_INET),
    });
  if (v6)
    await addPodSideRoutes6(s.pod, {
      podIndex: pair.podIndex,
      podIp: v6,
      hostIps: hostIps6,
      serviceCidrs: cidrsOf(spec.hostVeth.serviceCidrs, AF_INET6),
    });
  fault('add-pod-routes');
  if (returnV4 || v6) {
    undo.push('add-return-path', async () => {
      if (returnV4) await removePodReturnRule(s.pod, AF_INET);
      if (v6) await removePodReturnRule(s.pod, AF_INET6);
    });
    if (returnV4) await addPodReturnPath(s.pod, { podIndex: pair.podIndex, hostIp: firstHostIp });
    if (v6) await addPodReturnPath6(s.pod, pair.podIndex);
    fault('add-return-path');
    // The IPv4 node-wide part also for an egress address: its drop of non-service traffic covers other sources.
    if (src4 !== undefined && firstHostIp !== undefined) await ensureHostConnmark(s.host, hostIps);
    if (v6) await ensureHostConnmark6(s.host);
    await marks;
    await marks6;
    fault('add-connmark');
  }
  if (egress !== undefined) {
    if (firstHostIp === undefined) throw new IptablesError('the host has no IPv4 address for IPv4 egress');
    const ip = egress;
    undo.push('add-egress', () => {
      removeEgressRules(ip);
    });
    await addEgressRoutes(s.pod, { podIndex: pair.podIndex, ip, hostIp: firstHostIp });
    installEgressRules(hostName, ip);
    fault('add-egress');
  }
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
      if (egress && egressRulesOf(egress).nat.length === 0)
        problems.push(`the host does not masquerade ${podName}'s egress address ${egress}`);
      if (v4 !== undefined) {
        if (!(await tableRoutes(s.pod, POD_RETURN_TABLE)).some((r) => r.oif === podIndex))
          problems.push(`the pod's return table ${POD_RETURN_TABLE} does not lead to ${podName}`);
        if (!mangleRules(s.podNsFd).some((r) => r.includes(`-i ${podName} `)))
          problems.push(`the pod's connmark rule for ${podName} is missing`);
      }
      if (v6) {
        if (!(await tableRoutes(s.pod, POD_RETURN_TABLE, AF_INET6)).some((r) => r.oif === podIndex))
          problems.push(`the pod's IPv6 return table ${POD_RETURN_TABLE} does not lead to ${podName}`);
        if (!mangleRules6(s.podNsFd).some((r) => r.includes(`-i ${podName} `)))
          problems.push(`the pod's IPv6 connmark rule for ${podName} is missing`);
      }
    }
  }
  return problems;
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
