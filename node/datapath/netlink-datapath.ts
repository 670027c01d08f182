import { closeSync } from 'node:fs';
import type { RtNetlinkSocket } from 'netlink/dist/rt/rt.js';
import type { LinkMessage } from 'netlink/dist/rt/structs.js';
import { VpcLeaseError } from '../../shared/errors.js';
import type { Logger } from '../../shared/log.js';
import { CniCode, CniError } from '../cni/errors.js';
import { bringEniUp, type EniLinkState, eniLinkState, refuseBootEni } from './eni-link.js';
import { openNetns } from './netns.js';
import { inspectPodRouting, podRoutingSpec, setupPodRouting, withPodNetns } from './pod-routing.js';
import {
  type Datapath,
  IMDS_ADDRESS,
  IMDS_ADDRESS_IPV6,
  type IpvlanMode,
  type PodLink,
  type PodLinkSpec,
  type PodLinkState,
  podAddresses,
} from './port.js';
import {
  type AddressFamily,
  AF_INET,
  AF_INET6,
  afOf,
  attr,
  CREATE_EXCL,
  CREATE_REPLACE,
  type CreateRtnl,
  cString,
  IFLA_INFO_DATA,
  IFLA_INFO_KIND,
  indexOfLink,
  ipBytes,
  ipOf,
  loadCreateRtNetlink,
  macOf,
  parseAttrs,
  REQUEST_TIMEOUT_MS,
  RT_TABLE_MAIN,
  RtnlError,
  rtnl,
  socketInNetns,
  stringOf,
  u16le,
  u32le,
} from './rtnl.js';
import { deletePodLink, tempLinkName } from './teardown.js';
import { faultPoint, type TestHooks } from './test-hooks.js';
import { UndoStack } from './undo.js';

/** No host interface carries the ENI's MAC (not attached yet, or detached). */
export class MasterMissingError extends VpcLeaseError {}

const MACVLAN_MODE_BRIDGE = 4;
const IFLA_MACVLAN_MODE = 1;
const IPVLAN_MODE = { l2: 0, l3: 1, l3s: 2 } as const;
const IFLA_IPVLAN_MODE = 1;

export { IMDS_ADDRESS, IMDS_ADDRESS_IPV6 } from './port.js';

/** IFLA_INFO_KIND out of an IFLA_LINKINFO blob. */
export function linkKind(linkinfo: Buffer | undefined): string | undefined {
  return stringOf(parseAttrs(linkinfo).get(IFLA_INFO_KIND));
}

/** IFLA_IPVLAN_MODE out of an IFLA_LINKINFO blob: the mode of the link's master, as the kernel keeps it. */
export function ipvlanModeOf(linkinfo: Buffer | undefined): IpvlanMode | undefined {
  if (linkKind(linkinfo) !== 'ipvlan') return undefined;
  const mode = parseAttrs(parseAttrs(linkinfo).get(IFLA_INFO_DATA)).get(IFLA_IPVLAN_MODE);
  if (mode === undefined || mode.length < 2) return undefined;
  const value = mode.readUInt16LE(0);
  return (Object.keys(IPVLAN_MODE) as IpvlanMode[]).find((m) => IPVLAN_MODE[m] === value);
}

export class NetlinkDatapath implements Datapath {
  private constructor(
    private readonly create: CreateRtnl,
    private readonly host: RtNetlinkSocket,
    private readonly log: Logger,
    private readonly hooks: TestHooks,
  ) {}

  static async open(log: Logger, hooks: TestHooks): Promise<NetlinkDatapath> {
    const create = await loadCreateRtNetlink();
    return new NetlinkDatapath(create, create(), log, hooks);
  }

  close(): void {
    this.host.socket.close();
  }

  private socketIn(nsFd: number): RtNetlinkSocket {
    return socketInNetns(this.create, nsFd);
  }

  private async findMaster(mac: string): Promise<LinkMessage | undefined> {
    const links = await rtnl('list host links', () =>
      this.host.getLinks(undefined, undefined, { timeout: REQUEST_TIMEOUT_MS }),
    );
    const matches = links.filter((l) => macOf(l.attrs.address) === mac.toLowerCase());
    // A VLAN or macvlan on the ENI shares its MAC; the ENI itself is the one that is not a virtual child.
    return matches.find((l) => !['ipvlan', 'macvlan', 'vlan'].includes(linkKind(l.attrs.linkinfo) ?? '')) ?? matches[0];
  }

  async eniLink(mac: string): Promise<EniLinkState | undefined> {
    const master = await this.findMaster(mac);
    return master ? eniLinkState(master) : undefined;
  }

  private linkInfo(spec: PodLinkSpec): Buffer {
    const data =
      this.hooks.linkKind === 'macvlan'
        ? attr(IFLA_MACVLAN_MODE, u32le(MACVLAN_MODE_BRIDGE))
        : attr(IFLA_IPVLAN_MODE, u16le(IPVLAN_MODE[spec.mode]));
    return Buffer.concat([attr(IFLA_INFO_KIND, cString(this.hooks.linkKind)), attr(IFLA_INFO_DATA, data)]);
  }

  async setup(spec: PodLinkSpec): Promise<PodLink> {
    const undo = new UndoStack(this.log);
    const opts = { timeout: REQUEST_TIMEOUT_MS };
    let nsFd: number | undefined;
    let pod: RtNetlinkSocket | undefined;
    try {
      refuseBootEni(spec.deviceIndex, spec.masterMac);
      const master = await this.findMaster(spec.masterMac);
      if (!master || master.data.index === undefined)
        throw new MasterMissingError(`no host interface has the ENI's MAC ${spec.masterMac}`);
      if (this.hooks.linkKind !== 'macvlan') await this.refuseModeChange(spec, master.attrs.ifname ?? spec.masterMac);
      // Not undone: once up, another pod may be using the ENI (see eni-link.ts).
      const eniMtu = this.hooks.skipEniUp ? (master.attrs.mtu ?? 0) : await bringEniUp(this.host, master, this.log);
      faultPoint(this.hooks, 'find-master');
      nsFd = openNetns(spec.netnsPath);
      faultPoint(this.hooks, 'open-netns');

      // Created under a temp name straight into the pod's netns: a name that exists on the host can never clash,
      // and the link is never visible in the host namespace. The name is the attachment's (tempLinkName).
      const tempName = tempLinkName(spec.ifName);
      const mtu = spec.mtu > 0 ? spec.mtu : eniMtu;
      await rtnl(`create ${this.hooks.linkKind} link on ${master.attrs.ifname}`, () =>
        this.host.newLink(
          {},
          { ifname: tempName, link: u32le(master.data.index!), linkinfo: this.linkInfo(spec), netNsFd: nsFd!, mtu },
          { ...opts, flags: CREATE_EXCL },
        ),
      );
      const podSocket = this.socketIn(nsFd);
      pod = podSocket;
      let index: number | undefined;
      undo.push('create-link', async () => {
        const target = index ?? (await indexOfLink(podSocket, tempName));
        if (target !== undefined) await podSocket.delLink({ index: target }, undefined, opts);
      });
      index = await indexOfLink(podSocket, tempName);
      if (index === undefined) throw new RtnlError(`link ${tempName} vanished after it was created`);
      const linkIndex = index;
      faultPoint(this.hooks, 'create-link');

      await rtnl(`rename ${tempName} to ${spec.ifName}`, () =>
        podSocket.setLink({ index: linkIndex }, { ifname: spec.ifName }, opts),
      );
      faultPoint(this.hooks, 'rename-link');

      const addresses = podAddresses(spec);
      for (const address of addresses) {
        const family = afOf(address.ip);
        const ip = ipBytes(family, address.ip);
        // No duplicate address detection: the address is the pod's by its lease, and DAD would hold the address
        // tentative (unusable) for a second or more after ADD returned.
        const flags = family === AF_INET6 ? { nodad: true as const } : undefined;
        await rtnl(`add ${address.ip}/${address.prefixLength} to ${spec.ifName}`, () =>
          podSocket.newAddress(
            { family, prefixlen: address.prefixLength, index: linkIndex, ...(flags ? { flags } : {}) },
            { local: ip, address: ip, ...(flags ? { flags } : {}) },
            { ...opts, flags: CREATE_EXCL },
          ),
        );
      }
      faultPoint(this.hooks, 'add-address');

      await rtnl(`bring ${spec.ifName} up`, () =>
        podSocket.setLink({ index: linkIndex, flags: { up: true }, change: { up: true } }, undefined, opts),
      );
      faultPoint(this.hooks, 'link-up');

      for (const address of addresses) {
        const family = afOf(address.ip);
        await rtnl(`add the default route via ${address.gateway}`, () =>
          podSocket.newRoute(
            { family, dstLen: 0, table: RT_TABLE_MAIN, protocol: 'BOOT', scope: 'UNIVERSE', type: 'UNICAST' },
            { gateway: ipBytes(family, address.gateway), oif: linkIndex },
            { ...opts, flags: CREATE_EXCL },
          ),
        );
        // EC2's IMDS answers any address of the instance, pods' included: without this a pod could read the
        // node role's credentials. Unreachable in the pod's own table works in every mode, with or without the
        // host veth; Nitro serves IMDS on IPv6 too, so an IPv6 pod gets the same route for that address.
        const imds = family === AF_INET6 ? IMDS_ADDRESS_IPV6 : IMDS_ADDRESS;
        await rtnl(`make ${imds} unreachable from the pod`, () =>
          podSocket.newRoute(
            {
              family,
              dstLen: family === AF_INET6 ? 128 : 32,
              table: RT_TABLE_MAIN,
              protocol: 'BOOT',
              scope: 'UNIVERSE',
              type: 'UNREACHABLE',
            },
            { dst: ipBytes(family, imds) },
            { ...opts, flags: CREATE_REPLACE },
          ),
        );
      }
      faultPoint(this.hooks, 'add-route');

      // L3/L3S table and rule, host veth: each step pushes its undo on the same stack.
      if (spec.routing) {
        await setupPodRouting(
          { host: this.host, pod: podSocket, podNsFd: nsFd },
          podRoutingSpec(spec, spec.routing, master.data.index, mtu),
          undo,
          (step) => faultPoint(this.hooks, step),
        );
      }

      const [link] = await rtnl(`read ${spec.ifName} back`, () =>
        podSocket.getLink({ index: linkIndex }, undefined, opts),
      );
      faultPoint(this.hooks, 'read-back');
      undo.commit();
      return {
        ifName: spec.ifName,
        mac: macOf(link?.attrs.address),
        mtu: link?.attrs.mtu ?? mtu,
        sandbox: spec.netnsPath,
      };
    } catch (err) {
      await undo.unwind(err);
      throw err;
    } finally {
      pod?.socket.close();
      if (nsFd !== undefined) closeSync(nsFd);
    }
  }

  /**
   * The master's current ipvlan mode, read off a live peer's link (the host cannot see the master's port). A
   * different mode is refused before anything is made: creating the link would re-mode every live pod on the ENI.
   */
  private async refuseModeChange(spec: PodLinkSpec, masterName: string): Promise<void> {
    for (const peer of spec.peers ?? []) {
      const mode = await this.inPod(peer.netnsPath, async (socket) => {
        const index = await indexOfLink(socket, peer.ifName);
        if (index === undefined) return undefined;
        const [link] = await socket.getLink({ index }, undefined, { timeout: REQUEST_TIMEOUT_MS });
        return ipvlanModeOf(link?.attrs.linkinfo);
      });
      if (mode === undefined) continue; // that pod is gone: ask the next one
      if (mode === spec.mode) return;
      throw new CniError(
        CniCode.invalidConfig,
        `ipvlan mode ${spec.mode} refused: ENI ${spec.masterMac} (${masterName}) carries live pods in mode ${mode}, ` +
          "and ipvlan's mode belongs to the ENI, so a new link would re-mode them; drain the node before changing mode",
      );
    }
  }

  /** Runs `fn` with a socket in the pod's netns; undefined when the netns is gone or is not one. */
  private inPod<T>(netnsPath: string, fn: (socket: RtNetlinkSocket) => Promise<T>): Promise<T | undefined> {
    return withPodNetns(this.create, netnsPath, (pod) => fn(pod.socket));
  }

  teardown(netnsPath: string, ifName: string): Promise<'removed' | 'absent'> {
    return deletePodLink(netnsPath, ifName);
  }

  async inspectRouting(spec: PodLinkSpec): Promise<string[]> {
    const routing = spec.routing;
    if (!routing) return [];
    const masterIndex = (await this.findMaster(spec.masterMac))?.data.index;
    if (masterIndex === undefined) return [`no host interface has the ENI's MAC ${spec.masterMac}`];
    const problems = await withPodNetns(this.create, spec.netnsPath, (pod) =>
      inspectPodRouting(
        { host: this.host, pod: pod.socket, podNsFd: pod.nsFd },
        podRoutingSpec(spec, routing, masterIndex, spec.mtu),
      ),
    );
    return problems ?? [`network namespace ${spec.netnsPath} is gone`];
  }

  async inspect(netnsPath: string, ifName: string): Promise<PodLinkState | undefined> {
    return this.inPod(netnsPath, async (socket) => {
      const opts = { timeout: REQUEST_TIMEOUT_MS };
      const links = await rtnl('list pod links', () => socket.getLinks(undefined, undefined, opts));
      const link = links.find((l) => l.attrs.ifname === ifName);
      const index = link?.data.index;
      if (!link || index === undefined) return undefined;
      const addresses = (await rtnl('list pod addresses', () => socket.getAddresses(undefined, undefined, opts)))
        .filter((a) => a.data.index === index && (a.data.scope ?? 0) === 0)
        .flatMap((a) => {
          const family = a.data.family === AF_INET6 ? AF_INET6 : AF_INET;
          // IPv6 addresses come with IFA_ADDRESS alone (IFA_LOCAL is an IPv4 point-to-point notion).
          const ip = a.data.family === family ? ipOf(family, a.attrs.local ?? a.attrs.address) : undefined;
          return ip ? [`${ip}/${a.data.prefixlen}`] : [];
        });
      const routes = await rtnl('list pod routes', () => socket.getRoutes(undefined, undefined, opts));
      const gatewayOf = (family: AddressFamily): string | undefined =>
        ipOf(
          family,
          routes.find(
            (r) =>
              r.data.family === family &&
              r.data.dstLen === 0 &&
              (r.attrs.table ?? r.data.table) === RT_TABLE_MAIN &&
              r.attrs.oif === index &&
              r.attrs.gateway,
          )?.attrs.gateway,
        );
      const kind = linkKind(link.attrs.linkinfo);
      const defaultGateway = gatewayOf(AF_INET);
      const defaultGateway6 = gatewayOf(AF_INET6);
      return {
        ifName,
        ...(kind ? { kind } : {}),
        mac: macOf(link.attrs.address),
        mtu: link.attrs.mtu ?? 0,
        up: link.data.flags?.up === true,
        addresses,
        ...(defaultGateway ? { defaultGateway } : {}),
        ...(defaultGateway6 ? { defaultGateway6 } : {}),
      };
    });
  }
}
