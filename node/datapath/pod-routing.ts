import { closeSync } from 'node:fs';
import type { RtNetlinkSocket } from 'netlink/dist/rt/rt.js';
import {
  addPodReturnPath,
  ensureHostConnmark,
  mangleRules,
  POD_RETURN_TABLE,
  removePodConnmark,
  removePodReturnRule,
  startInstallPodConnmark,
} from './connmark.js';
import {
  addHostRoute,
  addPodSideRoutes,
  createVethPair,
  deleteLinkByName,
  hostAddresses,
  hostVethName,
  mainRoutesVia,
  podVethName,
} from './host-veth.js';
import { NetnsMissingError, NotANetnsError, openNetns } from './netns.js';
import { addPodRule, deletePodRule, listRules, rulesFrom } from './pod-rules.js';
import type { IpvlanMode } from './port.js';
import { addEniRoute, deleteEniRoute, hasPodRoute, tableForDevice, tableRoutes } from './route-tables.js';
import { unfilterPodVeth, validateHostVethByMark } from './rp-filter.js';
import { type CreateRtnl, indexOfLink, socketInNetns } from './rtnl.js';
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
export type RoutingStep = (typeof ROUTING_STEPS)[number];

export interface HostVethOptions {
  readonly containerId: string;
  readonly serviceCidrs: readonly string[];
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
  readonly podIp: string;
  readonly gateway: string;
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
  link: { readonly mode: IpvlanMode; readonly ifName: string; readonly ip: string; readonly gateway: string },
  routing: PodRouting,
  masterIndex: number,
  mtu: number,
): PodRoutingSpec {
  return {
    mode: link.mode,
    ifName: link.ifName,
    podIp: link.ip,
    gateway: link.gateway,
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

export async function setupPodRouting(
  s: RoutingSockets,
  spec: PodRoutingSpec,
  undo: UndoStack,
  fault: (step: RoutingStep) => void,
): Promise<void> {
  if (needsTable(spec.mode)) {
    const table = tableForDevice(spec.tableBase, spec.deviceIndex);
    // Rule first, route second, and undo in reverse: the pod's own route is what keeps its table alive.
    await addPodRule(s.host, { podIp: spec.podIp, table });
    undo.push('add-rule', async () => {
      await deletePodRule(s.host, { podIp: spec.podIp, table });
    });
    fault('add-rule');
    undo.push('add-table-route', async () => {
      await deleteEniRoute(s.host, { table, podIp: spec.podIp });
    });
    await addEniRoute(s.host, { table, gateway: spec.gateway, masterIndex: spec.masterIndex, podIp: spec.podIp });
    fault('add-table-route');
  }
  if (!spec.hostVeth) return;

  const hostName = hostVethName(spec.hostVeth.containerId, spec.ifName);
  const podName = podVethName(spec.ifName);
  const hostIps = await hostAddresses(s.host);
  // Pushed before the create: a create that fails half-way (host end made, peer lookup failed) is cleaned too.
  undo.push('create-veth', async () => {
    await deleteLinkByName(s.host, hostName);
  });
  const pair = await createVethPair(s.host, s.pod, { hostName, podName, podNsFd: s.podNsFd, mtu: spec.mtu });
  const firstHostIp = hostIps[0];
  // The pod's mark rules name only its veth: their iptables run overlaps the netlink steps below (and, in the
  // agent, other pods' calls) and is awaited before this ADD can succeed. Its undo waits for it to end first.
  const marks = firstHostIp === undefined ? undefined : startInstallPodConnmark(s.podNsFd, podName);
  if (marks) {
    marks.catch(() => undefined); // awaited below, or by the undo when an earlier step fails
    undo.push('add-connmark', async () => {
      await marks.catch(() => undefined);
      removePodConnmark(s.podNsFd, podName);
    });
  }
  // Both ends carry traffic whose route back leaves elsewhere, and neither has an address (see rp-filter.ts).
  validateHostVethByMark(hostName);
  unfilterPodVeth(s.podNsFd, podName);
  fault('create-veth');
  // Routes on either end go with the pair: their undo is the veth's.
  await addHostRoute(s.host, { hostIndex: pair.hostIndex, podIp: spec.podIp });
  fault('add-host-route');
  await addPodSideRoutes(s.pod, {
    podIndex: pair.podIndex,
    podIp: spec.podIp,
    hostIps,
    serviceCidrs: spec.hostVeth.serviceCidrs,
  });
  fault('add-pod-routes');
  if (firstHostIp !== undefined && marks) {
    undo.push('add-return-path', async () => {
      await removePodReturnRule(s.pod);
    });
    await addPodReturnPath(s.pod, { podIndex: pair.podIndex, hostIp: firstHostIp });
    fault('add-return-path');
    await ensureHostConnmark(s.host, hostIps);
    await marks;
    fault('add-connmark');
  }
}

/** CHECK's half: every problem found, empty when the routing is what ADD made. */
export async function inspectPodRouting(s: RoutingSockets, spec: PodRoutingSpec): Promise<string[]> {
  const problems: string[] = [];
  if (needsTable(spec.mode)) {
    const table = tableForDevice(spec.tableBase, spec.deviceIndex);
    const rules = rulesFrom(await listRules(s.host), spec.podIp);
    if (!rules.some((r) => r.table === table)) problems.push(`no rule from ${spec.podIp} lookup ${table}`);
    const stray = rules.filter((r) => r.table !== table).map((r) => r.table);
    if (stray.length > 0) problems.push(`rules from ${spec.podIp} also point at table(s) ${stray.join(', ')}`);
    const route = { table, gateway: spec.gateway, masterIndex: spec.masterIndex, podIp: spec.podIp };
    if (!hasPodRoute(await tableRoutes(s.host, table), route))
      problems.push(`table ${table} has no default route via ${spec.gateway} for ${spec.podIp}`);
  }
  if (spec.hostVeth) {
    const hostName = hostVethName(spec.hostVeth.containerId, spec.ifName);
    const podName = podVethName(spec.ifName);
    const hostIndex = await indexOfLink(s.host, hostName);
    const podIndex = await indexOfLink(s.pod, podName);
    if (hostIndex === undefined) problems.push(`host veth ${hostName} is missing`);
    if (podIndex === undefined) problems.push(`pod veth ${podName} is missing`);
    if (hostIndex !== undefined && !(await mainRoutesVia(s.host, hostIndex)).some((r) => r.dst === `${spec.podIp}/32`))
      problems.push(`the host has no route to ${spec.podIp} via ${hostName}`);
    if (podIndex !== undefined) {
      const podRoutes = (await mainRoutesVia(s.pod, podIndex)).map((r) => r.dst);
      for (const cidr of spec.hostVeth.serviceCidrs)
        if (!podRoutes.includes(cidr)) problems.push(`the pod has no route to service CIDR ${cidr} via ${podName}`);
      if (!(await tableRoutes(s.pod, POD_RETURN_TABLE)).some((r) => r.oif === podIndex))
        problems.push(`the pod's return table ${POD_RETURN_TABLE} does not lead to ${podName}`);
      if (!mangleRules(s.podNsFd).some((r) => r.includes(`-i ${podName} `)))
        problems.push(`the pod's connmark rule for ${podName} is missing`);
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
