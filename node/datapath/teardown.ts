import { closeSync } from 'node:fs';
import type { RawNetlinkSocket } from 'netlink/dist/raw.js';
import { inNetns } from './native.js';
import { NetnsMissingError, NotANetnsError, openNetns } from './netns.js';

/** A link deletion the kernel refused for another reason than "no such device". */
export class TeardownError extends Error {
  constructor(
    message: string,
    readonly errno: number,
  ) {
    super(message);
    this.name = 'TeardownError';
  }
}

const NETLINK_ROUTE = 0;
const RTM_DELLINK = 17;
const NLMSG_ERROR = 2;
const NLM_F_REQUEST = 1;
const NLM_F_ACK = 4;
const IFLA_IFNAME = 3;
const ENODEV = 19;
const TIMEOUT_MS = 5_000;

/** RTM_DELLINK by name: nlmsghdr + ifinfomsg (index 0) + IFLA_IFNAME — the kernel resolves the name. */
function delLinkMessage(ifName: string, seq: number): Buffer {
  const name = Buffer.from(`${ifName}\0`);
  const attrLen = 4 + name.length;
  const total = 16 + 16 + ((attrLen + 3) & ~3);
  const msg = Buffer.alloc(total);
  msg.writeUInt32LE(total, 0);
  msg.writeUInt16LE(RTM_DELLINK, 4);
  msg.writeUInt16LE(NLM_F_REQUEST | NLM_F_ACK, 6);
  msg.writeUInt32LE(seq, 8);
  msg.writeUInt16LE(attrLen, 32);
  msg.writeUInt16LE(IFLA_IFNAME, 34);
  name.copy(msg, 36);
  return msg;
}

/**
 * Deletes the pod's link with one RTM_DELLINK on a raw rtnetlink socket opened in the pod's netns. DEL takes this
 * path instead of the full datapath: it needs neither the host socket nor the `netlink` package's generated
 * struct code (~15 ms of a DEL's start-up). Addresses and routes on the link go with it.
 * A missing netns or link is success ('absent'), as DEL must be idempotent.
 */
export async function deletePodLink(netnsPath: string, ifName: string): Promise<'removed' | 'absent'> {
  let nsFd: number;
  try {
    nsFd = openNetns(netnsPath);
  } catch (err) {
    if (err instanceof NetnsMissingError || err instanceof NotANetnsError) return 'absent';
    throw err;
  }
  type RawModule = typeof import('netlink/dist/raw.js');
  // CommonJS: named exports under ESM interop, everything on `default` in the bundle.
  const raw = (await import('netlink/dist/raw.js')) as unknown as RawModule & { default?: RawModule };
  const RawSocket = (raw.default ?? raw).RawNetlinkSocket;
  let socket: RawNetlinkSocket | undefined;
  try {
    socket = inNetns(nsFd, () => new RawSocket(NETLINK_ROUTE));
    const open = socket;
    const seq = (Date.now() & 0x7fffffff) >>> 0;
    const errno = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new TeardownError(`deleting ${ifName} timed out`, 0)), TIMEOUT_MS);
      open.on('message', (msg: Buffer) => {
        for (let off = 0; off + 16 <= msg.length; ) {
          const len = msg.readUInt32LE(off);
          if (len < 16) break;
          if (msg.readUInt16LE(off + 4) === NLMSG_ERROR && msg.readUInt32LE(off + 8) === seq) {
            clearTimeout(timer);
            resolve(-msg.readInt32LE(off + 16));
            return;
          }
          off += (len + 3) & ~3;
        }
      });
      open.on('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      open.send(delLinkMessage(ifName, seq), { port: 0 }, (err) => {
        if (err) {
          clearTimeout(timer);
          reject(err);
        }
      });
    });
    if (errno === 0) return 'removed';
    if (errno === ENODEV) return 'absent';
    throw new TeardownError(`failed to delete ${ifName} in ${netnsPath}: errno ${errno}`, errno);
  } finally {
    socket?.close();
    closeSync(nsFd);
  }
}
