import { constants } from 'node:os';
import { getSystemErrorName } from 'node:util';
import type { RawNetlinkSocket } from 'netlink/dist/raw.js';
import type { RtNetlinkSocket } from 'netlink/dist/rt/rt.js';
import { VpcLeaseError } from '../../shared/errors.js';
import { formatIpv4, parseIpv4 } from '../../shared/ipv4.js';
import { formatIpv6, ipFamilyOf, parseIpv6 } from '../../shared/ipv6.js';
import { inNetns } from './native.js';

/**
 * The one rtnetlink layer under the datapath: the error type, the attribute encoder and decoder, address
 * encodings by family, the `netlink` package's socket (for requests with typed answers and dumps), and a raw
 * socket for DEL's keyed deletes, which must not pay for the package's generated struct code.
 */

const { EADDRNOTAVAIL, ENOENT, ESRCH } = constants.errno;
export const { EEXIST, ENODEV } = constants.errno;

/** A netlink request failed; `errno` is the kernel's answer (positive, e.g. 17) when there was one. */
export class RtnlError extends VpcLeaseError {
  /** The errno's name (e.g. EEXIST), for messages and CNI error details. */
  readonly errnoName: string | undefined;

  constructor(
    message: string,
    readonly errno?: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.errnoName = errno === undefined ? undefined : nameOfErrno(errno);
  }
}

function nameOfErrno(errno: number): string {
  try {
    return getSystemErrorName(-errno);
  } catch {
    return `errno ${errno}`;
  }
}

/** The kernel's errno behind a failed request, or undefined for failures of another kind (timeouts). */
export function errnoOf(err: unknown): number | undefined {
  return err instanceof RtnlError ? err.errno : undefined;
}

/** "Already gone" answers to a delete: no such file, process (route), device, or address. */
export function isGone(errno: number | undefined): boolean {
  return errno === ENOENT || errno === ESRCH || errno === ENODEV || errno === EADDRNOTAVAIL;
}

export const AF_INET = 2;
export const AF_INET6 = 10;
/** The families the datapath encodes. */
export type AddressFamily = typeof AF_INET | typeof AF_INET6;

/** The rtnetlink family of an address's text. */
export function afOf(ip: string): AddressFamily {
  return ipFamilyOf(ip) === 'ipv6' ? AF_INET6 : AF_INET;
}
export const RT_TABLE_MAIN = 254;
/**
 * Per request. The kernel answers in microseconds, but a request first waits for the RTNL mutex, which a loaded
 * node (many pods torn down at once) holds for seconds; the runtime gives the whole CNI call minutes, and no
 * deadline of its own reaches the plugin, so only a kernel that never answers should meet this. Same as the
 * iptables spawns' limit (connmark.ts).
 */
export const REQUEST_TIMEOUT_MS = 30_000;
/** NLM_F_CREATE | NLM_F_EXCL: a create never silently reuses an object someone else made. */
export const CREATE_EXCL = 0x400 | 0x200;
/** NLM_F_CREATE | NLM_F_REPLACE: idempotent for objects that are ours by construction (keyed by the pod's address). */
export const CREATE_REPLACE = 0x400 | 0x100;
/** RTNH_F_ONLINK in rtm_flags: the gateway is on the link even though the link has no address in its subnet. */
export const RTNH_F_ONLINK = 4;

export const NETLINK_ROUTE = 0;
export const NLMSG_ERROR = 2;
const NLM_F_REQUEST = 1;
const NLM_F_ACK = 4;
const NLMSG_HDRLEN = 16;
const NLA_TYPE_MASK = 0x3fff; // drops NLA_F_NESTED and NLA_F_NET_BYTEORDER
export const RTM_DELLINK = 17;
export const RTM_GETLINK = 18;
export const RTM_DELROUTE = 25;
export const RTM_DELRULE = 33;
export const IFLA_IFNAME = 3;
export const IFLA_MTU = 4;
export const IFLA_NET_NS_FD = 28;
export const IFLA_INFO_KIND = 1;
export const IFLA_INFO_DATA = 2;

// ---- encoder and decoder

/** One netlink attribute: length, type, payload, padded to 4 bytes. */
export function attr(type: number, payload: Buffer): Buffer {
  const len = 4 + payload.length;
  const out = Buffer.alloc((len + 3) & ~3);
  out.writeUInt16LE(len, 0);
  out.writeUInt16LE(type, 2);
  payload.copy(out, 4);
  return out;
}

/** The attributes of a blob by type (the first of each); nested ones are blobs to decode again. */
export function parseAttrs(blob: Buffer | undefined): Map<number, Buffer> {
  const out = new Map<number, Buffer>();
  if (!blob) return out;
  for (let off = 0; off + 4 <= blob.length; ) {
    const len = blob.readUInt16LE(off);
    if (len < 4 || off + len > blob.length) break;
    const type = blob.readUInt16LE(off + 2) & NLA_TYPE_MASK;
    if (!out.has(type)) out.set(type, blob.subarray(off + 4, off + len));
    off += (len + 3) & ~3;
  }
  return out;
}

export function cString(text: string): Buffer {
  return Buffer.from(`${text}\0`);
}

export function stringOf(payload: Buffer | undefined): string | undefined {
  return payload?.toString('utf8').replace(/\0+$/, '');
}

export function u16le(value: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16LE(value);
  return b;
}

export function u32le(value: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(value >>> 0);
  return b;
}

/** An address in network order, as rtnetlink attributes carry it. */
export function ipBytes(family: AddressFamily, ip: string): Buffer {
  if (family === AF_INET6) return Buffer.from(parseIpv6(ip).toString(16).padStart(32, '0'), 'hex');
  if (family !== AF_INET) throw new RangeError(`address family ${family} is not supported`);
  const b = Buffer.alloc(4);
  b.writeUInt32BE(parseIpv4(ip));
  return b;
}

/** The text of an address attribute (IPv6 canonical); undefined when absent or not of the family's length. */
export function ipOf(family: AddressFamily, payload: Buffer | undefined): string | undefined {
  if (family === AF_INET6)
    return payload?.length === 16 ? formatIpv6(BigInt(`0x${payload.toString('hex')}`)) : undefined;
  if (family !== AF_INET || payload?.length !== 4) return undefined;
  return formatIpv4(payload.readUInt32BE(0));
}

export function macOf(payload: Buffer | undefined): string {
  return payload ? [...payload].map((b) => b.toString(16).padStart(2, '0')).join(':') : '';
}

/** A request message: nlmsghdr (REQUEST | ACK) + body. */
export function message(type: number, seq: number, body: Buffer): Buffer {
  const header = Buffer.alloc(NLMSG_HDRLEN);
  header.writeUInt32LE(NLMSG_HDRLEN + body.length, 0);
  header.writeUInt16LE(type, 4);
  header.writeUInt16LE(NLM_F_REQUEST | NLM_F_ACK, 6);
  header.writeUInt32LE(seq, 8);
  return Buffer.concat([header, body]);
}

/** ifinfomsg (index 0) + IFLA_IFNAME: the kernel resolves the name. */
export function linkByName(name: string): Buffer {
  return Buffer.concat([Buffer.alloc(16), attr(IFLA_IFNAME, cString(name))]);
}

/** The errno of an NLMSG_ERROR answering `seq` in a datagram (0: an ACK); undefined when none does. */
export function errnoAnswering(datagram: Buffer, seq: number): number | undefined {
  for (let off = 0; off + NLMSG_HDRLEN <= datagram.length; ) {
    const len = datagram.readUInt32LE(off);
    if (len < NLMSG_HDRLEN) break;
    if (datagram.readUInt16LE(off + 4) === NLMSG_ERROR && datagram.readUInt32LE(off + 8) === seq)
      return 0 - datagram.readInt32LE(off + NLMSG_HDRLEN);
    off += (len + 3) & ~3;
  }
  return undefined;
}

// ---- requests

function describe(err: unknown): string {
  if (err instanceof RtnlError && err.errnoName) return err.errnoName;
  return err instanceof Error ? err.message : String(err);
}

/** Runs one request; a failure becomes "failed to <what>: <errno name>", keeping the errno. */
export async function rtnl<T>(what: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    throw new RtnlError(`failed to ${what}: ${describe(err)}`, errnoOf(err), { cause: err });
  }
}

/** Runs a delete; "already gone" is 'absent', since DEL and undo must be idempotent. */
export async function rtnlDelete(what: string, call: () => Promise<unknown>): Promise<'removed' | 'absent'> {
  try {
    await call();
    return 'removed';
  } catch (err) {
    if (isGone(errnoOf(err))) return 'absent';
    throw new RtnlError(`failed to ${what}: ${describe(err)}`, errnoOf(err), { cause: err });
  }
}

/** One RTM_GETLINK by name (no dump: the pod may hold many links, the host hundreds); undefined when none. */
export async function indexOfLink(socket: RtNetlinkSocket, name: string): Promise<number | undefined> {
  try {
    const [link] = await socket.getLink({}, { ifname: name }, { timeout: REQUEST_TIMEOUT_MS });
    return link?.data.index;
  } catch (err) {
    if (errnoOf(err) === ENODEV) return undefined;
    throw new RtnlError(`failed to look up link ${name}: ${describe(err)}`, errnoOf(err), { cause: err });
  }
}

type NetlinkRequest = RtNetlinkSocket['socket']['request'];
/** Opens an rtnetlink socket in this thread's netns whose failed requests reject with an RtnlError. */
export type CreateRtnl = () => RtNetlinkSocket;

let createFn: CreateRtnl | undefined;

/** Only the rtnetlink module of the package (its index also loads nl80211, WireGuard and genl). */
export async function loadCreateRtNetlink(): Promise<CreateRtnl> {
  if (createFn) return createFn;
  type RtModule = typeof import('netlink/dist/rt/rt.js');
  const rt = await import('netlink/dist/rt/rt.js');
  // CommonJS: named exports under ESM interop, or everything on `default` in the bundle.
  const mod = rt as unknown as Partial<RtModule> & { default?: RtModule };
  const create = mod.default?.createRtNetlink ?? mod.createRtNetlink;
  if (!create) throw new RtnlError('the netlink package has no createRtNetlink');
  createFn = () => withNumericErrno(create());
  return createFn;
}

/**
 * The package reports a kernel refusal only as text ("Request rejected: EEXIST"). Its request takes
 * `checkError: false` and then hands back the NLMSG_ERROR itself, so the errno is read here as the number the
 * kernel sent, for every method of the socket.
 */
function withNumericErrno(rt: RtNetlinkSocket): RtNetlinkSocket {
  const nl = rt.socket;
  const request: NetlinkRequest = nl.request.bind(nl);
  nl.request = async (type, data, options) => {
    const [messages, info] = await request(type, data, { ...options, checkError: false });
    const first = messages[0];
    if (first?.type !== NLMSG_ERROR) return [messages, info];
    const errno = 0 - first.data.readInt32LE(0);
    if (errno === 0) return [[], info];
    throw new RtnlError(`the kernel refused the request: ${nameOfErrno(errno)}`, errno);
  };
  return rt;
}

/**
 * A socket belongs to the netns of the thread that opened it: enter the netns on this thread for the socket()
 * call only, then return. CLONE_NEWNET is per-thread, so libuv's workers never notice.
 */
export function socketInNetns(create: CreateRtnl, nsFd: number): RtNetlinkSocket {
  return inNetns(nsFd, create);
}

type RawModule = typeof import('netlink/dist/raw.js');

/** Loads only the package's raw socket: no generated struct code (DEL's start-up). */
export async function loadRawSocket(): Promise<RawModule['RawNetlinkSocket']> {
  const raw = await import('netlink/dist/raw.js');
  return ((raw as RawModule & { default?: RawModule }).default ?? raw).RawNetlinkSocket;
}

/** One raw rtnetlink socket and sequential requests answered with the kernel's errno (0: done). */
export class RawRtnl {
  private seq = (Date.now() & 0x3fffffff) >>> 0;

  private constructor(private readonly socket: RawNetlinkSocket) {}

  /** Opened in `nsFd`'s netns when given, else in this thread's. */
  static open(Socket: RawModule['RawNetlinkSocket'], nsFd?: number): RawRtnl {
    const make = (): RawNetlinkSocket => new Socket(NETLINK_ROUTE);
    return new RawRtnl(nsFd === undefined ? make() : inNetns(nsFd, make));
  }

  request(type: number, body: Buffer, what: string): Promise<number> {
    const seq = ++this.seq;
    return new Promise<number>((resolve, reject) => {
      const done = (fn: () => void): void => {
        clearTimeout(timer);
        this.socket.off('message', onMessage);
        this.socket.off('error', onError);
        fn();
      };
      const onMessage = (datagram: Buffer): void => {
        const errno = errnoAnswering(datagram, seq);
        if (errno !== undefined) done(() => resolve(errno));
      };
      const onError = (err: NodeJS.ErrnoException): void =>
        done(() => reject(new RtnlError(`failed to ${what}: ${err.message}`, errnoByName(err.code), { cause: err })));
      const timer = setTimeout(() => done(() => reject(new RtnlError(`${what} timed out`))), REQUEST_TIMEOUT_MS);
      this.socket.on('message', onMessage);
      this.socket.on('error', onError);
      this.socket.send(message(type, seq, body), { port: 0 }, (err) => {
        if (err) onError(err);
      });
    });
  }

  /** A delete: 'absent' when the kernel says it is already gone, an error for any other refusal. */
  async remove(type: number, body: Buffer, what: string): Promise<'removed' | 'absent'> {
    const errno = await this.request(type, body, what);
    if (errno === 0) return 'removed';
    if (isGone(errno)) return 'absent';
    throw new RtnlError(`failed to ${what}: ${nameOfErrno(errno)}`, errno);
  }

  close(): void {
    this.socket.close();
  }
}

function errnoByName(code: string | undefined): number | undefined {
  return code === undefined ? undefined : (constants.errno as Record<string, number | undefined>)[code];
}
