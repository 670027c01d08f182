import { randomBytes } from 'node:crypto';
import { closeSync } from 'node:fs';
import type { RtNetlinkSocket } from 'netlink/dist/rt/rt.js';
import type { LinkMessage } from 'netlink/dist/rt/structs.js';
import { VpcLeaseError } from '../../shared/errors.js';
import { formatIpv4 } from '../../shared/ipv4.js';
import type { Logger } from '../../shared/log.js';
import { CniCode, CniError } from '../cni/errors.js';
import { bringEniUp, type EniLinkState, eniLinkState, refuseBootEni } from './eni-link.js';
import { openNetns } from './netns.js';
import { inspectPodRouting, podRoutingSpec, setupPodRouting, withPodNetns } from './pod-routing.js';
import type { Datapath, IpvlanMode, PodLink, PodLinkSpec, PodLinkState } from './port.js';
import { socketInNetns } from './rtnl.js';
import { deletePodLink } from './teardown.js';
import { faultPoint, type TestHooks } from './test-hooks.js';
import { UndoStack } from './undo.js';

/** Only the rtnetlink parts: the package's index also loads nl80211, WireGuard and genl (~145 KiB we never run). */
interface NetlinkModule {
  readonly createRtNetlink: typeof import('netlink/dist/rt/rt.js').createRtNetlink;
  readonly AttrStream: typeof import('netlink/dist/structs.js').AttrStream;
  readonly ifla: typeof import('netlink/dist/rt/ifla.js');
}

/** No host interface carries the ENI's MAC (not attached yet, or detached). */
export class MasterMissingError extends VpcLeaseError {}
/** A netlink request failed; `errnoName` is the kernel's answer when there was one (e.g. EEXIST). */
export class NetlinkError extends VpcLeaseError {
  constructor(
    message: string,
    readonly errnoName?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

const AF_INET = 2;
const RT_TABLE_MAIN = 254;
const IFLA_INFO_KIND = 1;
const IFLA_INFO_DATA = 2;
const MACVLAN_MODE_BRIDGE = 4;
const IPVLAN_MODE = { l2: 0, l3: 1, l3s: 2 } as const;
const IFLA_IPVLAN_MODE = 1;
const REQUEST_TIMEOUT_MS = 5_000;
/** NLM_F_CREATE | NLM_F_EXCL: a create never silently reuses an object someone else made. */
const CREATE_EXCL = 0x400 | 0x200;
/** NLM_F_CREATE | NLM_F_REPLACE: a second attachment in the same pod shares the IMDS route. */
const CREATE_REPLACE = 0x400 | 0x100;
/**
 * The instance metadata service. Its route stays in the pod's namespace after DEL (it names no device, and a
 * second attachment may share it); the namespace goes with the pod.
 */
export const IMDS_ADDRESS = '169.254.169.254';

/** Lazily loaded: VERSION, GC and STATUS never pay for the native binding (~50 ms of start-up). */
async function loadNetlink(): Promise<NetlinkModule> {
  const [rt, structs, ifla] = await Promise.all([
    import('netlink/dist/rt/rt.js'),
    import('netlink/dist/structs.js'),
    import('netlink/dist/rt/ifla.js'),
  ]);
  // CommonJS modules: named exports under ESM interop, or everything on `default` in the bundle.
  const cjs = <T>(m: T): T => (m as T & { default?: T }).default ?? m;
  return { createRtNetlink: cjs(rt).createRtNetlink, AttrStream: cjs(structs).AttrStream, ifla: cjs(ifla) };
}

function macOf(buf: Buffer | undefined): string {
  return buf ? [...buf].map((b) => b.toString(16).padStart(2, '0')).join(':') : '';
}

function ipBytes(ip: string): Buffer {
  return Buffer.from(ip.split('.').map(Number));
}

function u32(value: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(value >>> 0);
  return b;
}

/** IFLA_INFO_KIND out of an IFLA_LINKINFO blob. */
function linkKind(linkinfo: Buffer | undefined): string | undefined {
  if (!linkinfo) return undefined;
  let off = 0;
  while (off + 4 <= linkinfo.length) {
    const len = linkinfo.readUInt16LE(off);
    const type = linkinfo.readUInt16LE(off + 2) & 0x3fff;
    if (len < 4) break;
    if (type === IFLA_INFO_KIND)
      return linkinfo
        .subarray(off + 4, off + len)
        .toString('utf8')
        .replace(/\0+$/, '');
    off += (len + 3) & ~3;
  }
  return undefined;
}

/** IFLA_IPVLAN_MODE out of an IFLA_LINKINFO blob: the mode of the link's master, as the kernel keeps it. */
function ipvlanModeOf(linkinfo: Buffer | undefined): IpvlanMode | undefined {
  if (!linkinfo || linkKind(linkinfo) !== 'ipvlan') return undefined;
  let off = 0;
  while (off + 4 <= linkinfo.length) {
    const len = linkinfo.readUInt16LE(off);
    if (len < 4) break;
    if ((linkinfo.readUInt16LE(off + 2) & 0x3fff) === IFLA_INFO_DATA) {
      const data = linkinfo.subarray(off + 4, off + len);
      let at = 0;
      while (at + 6 <= data.length) {
        const alen = data.readUInt16LE(at);
        if (alen < 4) break;
        if ((data.readUInt16LE(at + 2) & 0x3fff) === IFLA_IPVLAN_MODE) {
          const mode = data.readUInt16LE(at + 4);
          return (Object.keys(IPVLAN_MODE) as IpvlanMode[]).find((m) => IPVLAN_MODE[m] === mode);
        }
        at += (alen + 3) & ~3;
      }
    }
    off += (len + 3) & ~3;
  }
  return undefined;
}

function errnoName(err: unknown): string | undefined {
  const m = /Request rejected: (\w+)/.exec(err instanceof Error ? err.message : String(err));
  return m?.[1];
}

async function nl<T>(what: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    const name = errnoName(err);
    throw new NetlinkError(`failed to ${what}: ${name ?? (err instanceof Error ? err.message : String(err))}`, name, {
      cause: err,
    });
  }
}

export class NetlinkDatapath implements Datapath {
  private constructor(
    private readonly nl: NetlinkModule,
    private readonly host: RtNetlinkSocket,
    private readonly log: Logger,
    private readonly hooks: TestHooks,
  ) {}

  static async open(log: Logger, hooks: TestHooks): Promise<NetlinkDatapath> {
    const mod = await loadNetlink();
    return new NetlinkDatapath(mod, mod.createRtNetlink(), log, hooks);
  }

  close(): void {
    this.host.socket.close();
  }

  private socketIn(nsFd: number): RtNetlinkSocket {
    return socketInNetns(this.nl.createRtNetlink, nsFd);
  }

  private async findMaster(mac: string): Promise<LinkMessage | undefined> {
    const links = await nl('list host links', () =>
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
    const stream = new this.nl.AttrStream();
    if (this.hooks.linkKind === 'macvlan') {
      stream.push(IFLA_INFO_KIND, Buffer.from('macvlan\0'));
      stream.push(IFLA_INFO_DATA, this.nl.ifla.formatMacvlan({ mode: MACVLAN_MODE_BRIDGE }));
    } else {
      stream.push(IFLA_INFO_KIND, Buffer.from('ipvlan\0'));
      stream.push(IFLA_INFO_DATA, this.nl.ifla.formatIpvlan({ mode: IPVLAN_MODE[spec.mode] }));
    }
    return Buffer.concat(stream.bufs);
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

      // Created under a random name straight into the pod's netns: a name that exists on the host (or in the
      // pod) can never clash, and the link is never visible in the host namespace.
      const tempName = `vl${randomBytes(6).toString('hex')}`;
      const mtu = spec.mtu > 0 ? spec.mtu : eniMtu;
      await nl(`create ${this.hooks.linkKind} link on ${master.attrs.ifname}`, () =>
        this.host.newLink(
          {},
          { ifname: tempName, link: u32(master.data.index!), linkinfo: this.linkInfo(spec), netNsFd: nsFd!, mtu },
          { ...opts, flags: CREATE_EXCL },
        ),
      );
      const podSocket = this.socketIn(nsFd);
      pod = podSocket;
      let index: number | undefined;
      undo.push('create-link', async () => {
        const target = index ?? (await this.indexByName(podSocket, tempName));
        if (target !== undefined) await podSocket.delLink({ index: target }, undefined, opts);
      });
      index = await this.indexByName(podSocket, tempName);
      if (index === undefined) throw new NetlinkError(`link ${tempName} vanished after it was created`);
      const linkIndex = index;
      faultPoint(this.hooks, 'create-link');

      await nl(`rename ${tempName} to ${spec.ifName}`, () =>
        podSocket.setLink({ index: linkIndex }, { ifname: spec.ifName }, opts),
      );
      faultPoint(this.hooks, 'rename-link');

      const ip = ipBytes(spec.ip);
      await nl(`add ${spec.ip}/${spec.prefixLength} to ${spec.ifName}`, () =>
        podSocket.newAddress(
          { family: AF_INET, prefixlen: spec.prefixLength, index: linkIndex },
          { local: ip, address: ip },
          { ...opts, flags: CREATE_EXCL },
        ),
      );
      faultPoint(this.hooks, 'add-address');

      await nl(`bring ${spec.ifName} up`, () =>
        podSocket.setLink({ index: linkIndex, flags: { up: true }, change: { up: true } }, undefined, opts),
      );
      faultPoint(this.hooks, 'link-up');

      await nl(`add the default route via ${spec.gateway}`, () =>
        podSocket.newRoute(
          { family: AF_INET, dstLen: 0, table: RT_TABLE_MAIN, protocol: 'BOOT', scope: 'UNIVERSE', type: 'UNICAST' },
          { gateway: ipBytes(spec.gateway), oif: linkIndex },
          { ...opts, flags: CREATE_EXCL },
        ),
      );
      // EC2's IMDS answers any address of the instance, pods' included: without this a pod could read the node
      // role's credentials. Unreachable in the pod's own table works in every mode, with or without the host veth.
      await nl(`make ${IMDS_ADDRESS} unreachable from the pod`, () =>
        podSocket.newRoute(
          {
            family: AF_INET,
            dstLen: 32,
            table: RT_TABLE_MAIN,
            protocol: 'BOOT',
            scope: 'UNIVERSE',
            type: 'UNREACHABLE',
          },
          { dst: ipBytes(IMDS_ADDRESS) },
          { ...opts, flags: CREATE_REPLACE },
        ),
      );
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

      const [link] = await nl(`read ${spec.ifName} back`, () =>
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
        const index = await this.indexByName(socket, peer.ifName);
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

  /** One RTM_GETLINK by name (no dump): the pod may hold many links, the host hundreds. */
  private async indexByName(socket: RtNetlinkSocket, name: string): Promise<number | undefined> {
    try {
      const [link] = await socket.getLink({}, { ifname: name }, { timeout: REQUEST_TIMEOUT_MS });
      return link?.data.index;
    } catch (err) {
      if (errnoName(err) === 'ENODEV') return undefined;
      throw new NetlinkError(`failed to look up link ${name}`, errnoName(err), { cause: err });
    }
  }

  /** Runs `fn` with a socket in the pod's netns; undefined when the netns is gone or is not one. */
  private inPod<T>(netnsPath: string, fn: (socket: RtNetlinkSocket) => Promise<T>): Promise<T | undefined> {
    return withPodNetns(this.nl.createRtNetlink, netnsPath, (pod) => fn(pod.socket));
  }

  teardown(netnsPath: string, ifName: string): Promise<'removed' | 'absent'> {
    return deletePodLink(netnsPath, ifName);
  }

  async inspectRouting(spec: PodLinkSpec): Promise<string[]> {
    const routing = spec.routing;
    if (!routing) return [];
    const masterIndex = (await this.findMaster(spec.masterMac))?.data.index;
    if (masterIndex === undefined) return [`no host interface has the ENI's MAC ${spec.masterMac}`];
    const problems = await withPodNetns(this.nl.createRtNetlink, spec.netnsPath, (pod) =>
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
      const links = await nl('list pod links', () => socket.getLinks(undefined, undefined, opts));
      const link = links.find((l) => l.attrs.ifname === ifName);
      const index = link?.data.index;
      if (!link || index === undefined) return undefined;
      const addresses = (await nl('list pod addresses', () => socket.getAddresses(undefined, undefined, opts)))
        .filter((a) => a.data.index === index && a.data.family === AF_INET && a.attrs.local)
        .map((a) => `${formatIpv4(a.attrs.local!.readUInt32BE(0))}/${a.data.prefixlen}`);
      const routes = await nl('list pod routes', () => socket.getRoutes({ family: AF_INET }, undefined, opts));
      const defaultRoute = routes.find(
        (r) =>
          r.data.family === AF_INET &&
          r.data.dstLen === 0 &&
          (r.attrs.table ?? r.data.table) === RT_TABLE_MAIN &&
          r.attrs.oif === index &&
          r.attrs.gateway,
      );
      const kind = linkKind(link.attrs.linkinfo);
      return {
        ifName,
        ...(kind ? { kind } : {}),
        mac: macOf(link.attrs.address),
        mtu: link.attrs.mtu ?? 0,
        up: link.data.flags?.up === true,
        addresses,
        ...(defaultRoute?.attrs.gateway
          ? { defaultGateway: formatIpv4(defaultRoute.attrs.gateway.readUInt32BE(0)) }
          : {}),
      };
    });
  }
}
