import { createHash } from 'node:crypto';
import type { RtNetlinkSocket } from 'netlink/dist/rt/rt.js';
import { parseCidr } from '../../shared/ipv4.js';
import { parseIpv6Cidr } from '../../shared/ipv6.js';
import {
  type AddressFamily,
  AF_INET,
  AF_INET6,
  attr,
  CREATE_EXCL,
  CREATE_REPLACE,
  cString,
  ENODEV,
  errnoOf,
  IFLA_IFNAME,
  IFLA_INFO_DATA,
  IFLA_INFO_KIND,
  IFLA_MTU,
  IFLA_NET_NS_FD,
  indexOfLink,
  ipBytes,
  ipOf,
  REQUEST_TIMEOUT_MS,
  RT_TABLE_MAIN,
  RtnlError,
  rtnl,
  u32le,
} from './rtnl.js';

/**
 * Host reachability, like lyft's unnumbered-ptp: an ipvlan slave can never reach its master's namespace (the
 * driver switches slave→master traffic straight to the wire), so the pod gets a second link, one end of a veth
 * pair, and neither end gets an address. The pod reaches the host's addresses through /32 routes on its end
 * (source: the pod's own address), the service CIDRs through the first host address as gateway, and the host
 * reaches the pod through one /32 route on its end. ARP works without proxy_arp: each side answers for its own
 * addresses on any interface (arp_ignore=0), and each has a route back to the asker through the veth.
 *
 * Names are derived, never guessed: the host end from (containerId, ifName), so DEL and CHECK find it again;
 * the pod end from ifName, so two attachments in one pod get two pairs.
 */
const VETH_INFO_PEER = 1;
/** Host addresses beyond this many are not routed through the veth (a node has one or a few). */
const MAX_HOST_ADDRESSES = 32;

export function hostVethName(containerId: string, ifName: string): string {
  return `vlh${createHash('sha256').update(`${containerId}/${ifName}`).digest('hex').slice(0, 12)}`;
}

export function podVethName(ifName: string): string {
  const plain = `vh-${ifName}`;
  return plain.length <= 15 ? plain : `vh-${createHash('sha256').update(ifName).digest('hex').slice(0, 12)}`;
}

/**
 * IFLA_LINKINFO for a veth whose peer is created straight in the pod's netns, named and sized. Not up: the
 * kernel configures the peer before the first end is registered, and opening it then fails with ENOTCONN.
 */
function vethLinkInfo(peerName: string, podNsFd: number, mtu: number): Buffer {
  const peer = Buffer.concat([
    Buffer.alloc(16), // ifinfomsg
    attr(IFLA_IFNAME, cString(peerName)),
    attr(IFLA_NET_NS_FD, u32le(podNsFd)),
    attr(IFLA_MTU, u32le(mtu)),
  ]);
  return Buffer.concat([attr(IFLA_INFO_KIND, cString('veth')), attr(IFLA_INFO_DATA, attr(VETH_INFO_PEER, peer))]);
}

/**
 * The host's global addresses of a family (IPv4 by default), in ifindex order (the first IPv4 one is the pod's
 * gateway to the service CIDRs).
 */
export async function hostAddresses(host: RtNetlinkSocket, family: AddressFamily = AF_INET): Promise<string[]> {
  const addresses = await rtnl('list host addresses', () =>
    host.getAddresses({ family }, undefined, { timeout: REQUEST_TIMEOUT_MS }),
  );
  return addresses
    .filter((a) => a.data.family === family && (a.data.scope ?? 0) === 0)
    .sort((a, b) => (a.data.index ?? 0) - (b.data.index ?? 0))
    .map((a) => ipOf(family, a.attrs.local ?? a.attrs.address))
    .filter((ip): ip is string => ip !== undefined)
    .filter((ip, i, all) => all.indexOf(ip) === i)
    .slice(0, MAX_HOST_ADDRESSES);
}

/** Names of the host interfaces that carry any of these addresses (the boot ENI, typically). */
export async function interfacesWith(host: RtNetlinkSocket, ips: readonly string[]): Promise<string[]> {
  const opts = { timeout: REQUEST_TIMEOUT_MS };
  const addresses = await rtnl('list host addresses', () => host.getAddresses({ family: AF_INET }, undefined, opts));
  const indexes = new Set(
    addresses
      .filter((a) => ips.includes(ipOf(AF_INET, a.attrs.local ?? a.attrs.address) ?? ''))
      .map((a) => a.data.index)
      .filter((i): i is number => i !== undefined),
  );
  const links = await rtnl('list host links', () => host.getLinks(undefined, undefined, opts));
  return links
    .filter((l) => l.data.index !== undefined && indexes.has(l.data.index))
    .map((l) => l.attrs.ifname)
    .filter((n): n is string => n !== undefined);
}

export interface VethPair {
  readonly hostIndex: number;
  readonly podIndex: number;
}

/** Creates the pair, both ends up, the pod's in the pod's netns. Exclusive: a name clash is an error. */
export async function createVethPair(
  host: RtNetlinkSocket,
  pod: RtNetlinkSocket,
  spec: { readonly hostName: string; readonly podName: string; readonly podNsFd: number; readonly mtu: number },
): Promise<VethPair> {
  await rtnl(`create veth ${spec.hostName}/${spec.podName}`, () =>
    host.newLink(
      { flags: { up: true }, change: { up: true } },
      { ifname: spec.hostName, mtu: spec.mtu, linkinfo: vethLinkInfo(spec.podName, spec.podNsFd, spec.mtu) },
      { timeout: REQUEST_TIMEOUT_MS, flags: CREATE_EXCL },
    ),
  );
  const hostIndex = await indexOfLink(host, spec.hostName);
  const podIndex = await indexOfLink(pod, spec.podName);
  if (hostIndex === undefined || podIndex === undefined)
    throw new RtnlError(`veth ${spec.hostName}/${spec.podName} vanished after it was created`);
  await rtnl(`bring ${spec.podName} up`, () =>
    pod.setLink({ index: podIndex, flags: { up: true }, change: { up: true } }, undefined, {
      timeout: REQUEST_TIMEOUT_MS,
    }),
  );
  return { hostIndex, podIndex };
}

/** Deletes a link by name; a missing one is 'absent'. Deleting either end of a veth removes both. */
export async function deleteLinkByName(socket: RtNetlinkSocket, name: string): Promise<'removed' | 'absent'> {
  const index = await indexOfLink(socket, name);
  if (index === undefined) return 'absent';
  try {
    await socket.delLink({ index }, undefined, { timeout: REQUEST_TIMEOUT_MS });
    return 'removed';
  } catch (err) {
    if (errnoOf(err) === ENODEV) return 'absent';
    throw new RtnlError(`failed to delete link ${name}`, errnoOf(err), { cause: err });
  }
}

/** What the pod-side routes need, in either family: the pod end of the veth, its address, and where to route. */
export interface PodSideRoutesSpec {
  readonly podIndex: number;
  readonly podIp: string;
  readonly hostIps: readonly string[];
  readonly serviceCidrs: readonly string[];
}

/** The pod's routes to the host's addresses (/32, on-link) and the service CIDRs (via the first host address). */
export async function addPodSideRoutes(pod: RtNetlinkSocket, spec: PodSideRoutesSpec): Promise<void> {
  const opts = { timeout: REQUEST_TIMEOUT_MS, flags: CREATE_EXCL };
  const src = ipBytes(AF_INET, spec.podIp);
  for (const hostIp of spec.hostIps) {
    await rtnl(`add the pod route to host address ${hostIp}`, () =>
      pod.newRoute(
        { family: AF_INET, dstLen: 32, table: RT_TABLE_MAIN, protocol: 'BOOT', scope: 'LINK', type: 'UNICAST' },
        { dst: ipBytes(AF_INET, hostIp), oif: spec.podIndex, prefsrc: src },
        opts,
      ),
    );
  }
  const gateway = spec.hostIps[0];
  if (spec.serviceCidrs.length > 0 && gateway === undefined)
    throw new RtnlError('the host has no global IPv4 address to route the service CIDRs through');
  for (const text of spec.serviceCidrs) {
    const cidr = parseCidr(text);
    await rtnl(`add the pod route to service CIDR ${text}`, () =>
      pod.newRoute(
        {
          family: AF_INET,
          dstLen: cidr.prefixLength,
          table: RT_TABLE_MAIN,
          protocol: 'BOOT',
          scope: 'UNIVERSE',
          type: 'UNICAST',
        },
        {
          dst: ipBytes(AF_INET, text.split('/')[0]!),
          gateway: ipBytes(AF_INET, gateway!),
          oif: spec.podIndex,
          prefsrc: src,
        },
        opts,
      ),
    );
  }
}

/** The host's /32 back to the pod. Replace: keyed by the pod's address, which this attachment holds. */
export async function addHostRoute(
  host: RtNetlinkSocket,
  spec: { readonly hostIndex: number; readonly podIp: string },
): Promise<void> {
  await rtnl(`add the host route to ${spec.podIp}`, () =>
    host.newRoute(
      { family: AF_INET, dstLen: 32, table: RT_TABLE_MAIN, protocol: 'BOOT', scope: 'LINK', type: 'UNICAST' },
      { dst: ipBytes(AF_INET, spec.podIp), oif: spec.hostIndex },
      { timeout: REQUEST_TIMEOUT_MS, flags: CREATE_REPLACE },
    ),
  );
}

export interface MainRoute {
  readonly dst: string;
  readonly oif?: number;
  readonly gateway?: string;
}

/** The main table's routes of a family (IPv4 by default) through one interface (CHECK). */
export async function mainRoutesVia(
  socket: RtNetlinkSocket,
  oif: number,
  family: AddressFamily = AF_INET,
): Promise<MainRoute[]> {
  const routes = await rtnl('list routes', () =>
    socket.getRoutes({ family }, undefined, { timeout: REQUEST_TIMEOUT_MS }),
  );
  return routes
    .filter((r) => r.data.family === family && (r.attrs.table ?? r.data.table) === RT_TABLE_MAIN && r.attrs.oif === oif)
    .map((r) => {
      const gateway = ipOf(family, r.attrs.gateway);
      return {
        dst: `${ipOf(family, r.attrs.dst) ?? (family === AF_INET ? '0.0.0.0' : '::')}/${r.data.dstLen ?? 0}`,
        oif,
        ...(gateway ? { gateway } : {}),
      };
    });
}

/**
 * IPv6 over the unnumbered veth. Neighbour discovery answers only for addresses on the interface asked, so each
 * end gets a fixed link-local address (every pair is its own link, so the same two on every pair) and every IPv6
 * route names the other end's as its gateway. Added without DAD: usable at once, and nothing else is on the link.
 */
export const HOST_VETH_LINK_LOCAL = 'fe80::1';
export const POD_VETH_LINK_LOCAL = 'fe80::2';
const RT_SCOPE_LINK = 253;

async function addLinkLocal(socket: RtNetlinkSocket, index: number, ip: string): Promise<void> {
  const bytes = ipBytes(AF_INET6, ip);
  await rtnl(`add ${ip}/64 to the veth`, () =>
    socket.newAddress(
      { family: AF_INET6, prefixlen: 64, index, flags: { nodad: true }, scope: RT_SCOPE_LINK },
      { local: bytes, address: bytes, flags: { nodad: true } },
      { timeout: REQUEST_TIMEOUT_MS, flags: CREATE_REPLACE },
    ),
  );
}

/** The two link-local addresses (their undo is the veth's). */
export async function addVethLinkLocals(host: RtNetlinkSocket, pod: RtNetlinkSocket, pair: VethPair): Promise<void> {
  await addLinkLocal(host, pair.hostIndex, HOST_VETH_LINK_LOCAL);
  await addLinkLocal(pod, pair.podIndex, POD_VETH_LINK_LOCAL);
}

/** One IPv6 route in the main table through a veth end, via the other end's link-local address. */
async function addVethRoute6(
  socket: RtNetlinkSocket,
  what: string,
  r: { readonly dst: string; readonly oif: number; readonly via: string; readonly src?: string },
): Promise<void> {
  const cidr = parseIpv6Cidr(r.dst.includes('/') ? r.dst : `${r.dst}/128`);
  await rtnl(what, () =>
    socket.newRoute(
      {
        family: AF_INET6,
        dstLen: cidr.prefixLength,
        table: RT_TABLE_MAIN,
        protocol: 'BOOT',
        scope: 'UNIVERSE',
        type: 'UNICAST',
      },
      {
        dst: ipBytes(AF_INET6, r.dst.split('/')[0]!),
        gateway: ipBytes(AF_INET6, r.via),
        oif: r.oif,
        ...(r.src ? { prefsrc: ipBytes(AF_INET6, r.src) } : {}),
      },
      { timeout: REQUEST_TIMEOUT_MS, flags: CREATE_REPLACE },
    ),
  );
}

/** The pod's IPv6 routes to the host's IPv6 addresses and the IPv6 service CIDRs, via the host end. */
export async function addPodSideRoutes6(pod: RtNetlinkSocket, spec: PodSideRoutesSpec): Promise<void> {
  for (const dst of [...spec.hostIps, ...spec.serviceCidrs])
    await addVethRoute6(pod, `add the pod route to ${dst}`, {
      dst,
      oif: spec.podIndex,
      via: HOST_VETH_LINK_LOCAL,
      src: spec.podIp,
    });
}

/** The host's /128 back to an IPv6 pod, via the pod end. Replace: keyed by the pod's address, which it holds. */
export async function addHostRoute6(
  host: RtNetlinkSocket,
  spec: { readonly hostIndex: number; readonly podIp: string },
): Promise<void> {
  await addVethRoute6(host, `add the host route to ${spec.podIp}`, {
    dst: spec.podIp,
    oif: spec.hostIndex,
    via: POD_VETH_LINK_LOCAL,
  });
}
