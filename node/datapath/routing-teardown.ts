import { closeSync } from 'node:fs';
import type { RawNetlinkSocket } from 'netlink/dist/raw.js';
import { CONNMARK, POD_FWMARK_RULE_PRIORITY, POD_RETURN_TABLE, startRemovePodConnmark } from './connmark.js';
import { hostVethName, podVethName } from './host-veth.js';
import { inNetns } from './native.js';
import { NetnsMissingError, NotANetnsError, openNetns } from './netns.js';
import { POD_RULE_PRIORITY } from './pod-rules.js';
import type { IpvlanMode } from './port.js';
import { podMetric, tableForDevice } from './route-tables.js';
import { ipv4Bytes, RtnlError } from './rtnl.js';

/**
 * DEL's half of pod-routing.ts, on raw rtnetlink messages: like the link deletion in teardown.ts, DEL needs
 * neither the `netlink` package's generated struct code nor a dump — every object is deleted by its key (rule
 * by source, table and priority; the pod's table route by table and metric; the veth by name), and "already
 * gone" is success, as DEL must be idempotent. ADD's undo uses the same path.
 */
export interface TeardownSpec {
  readonly mode: IpvlanMode;
  readonly ifName: string;
  readonly podIp?: string;
  readonly deviceIndex?: number;
  readonly tableBase: number;
  readonly hostVeth?: { readonly containerId: string };
}

const NETLINK_ROUTE = 0;
const NLMSG_ERROR = 2;
const NLM_F_REQUEST = 1;
const NLM_F_ACK = 4;
const RTM_DELLINK = 17;
const RTM_GETLINK = 18;
const RTM_DELROUTE = 25;
const RTM_DELRULE = 33;
const IFLA_IFNAME = 3;
const RTA_PRIORITY = 6;
const RTA_TABLE = 15;
const FRA_SRC = 2;
const FRA_PRIORITY = 6;
const FRA_FWMARK = 10;
const FRA_TABLE = 15;
const FRA_FWMASK = 16;
const AF_INET = 2;
const RT_SCOPE_NOWHERE = 255;
const FR_ACT_TO_TBL = 1;
const TIMEOUT_MS = 5_000;
/** "Already gone" answers: no such device, no such route, no such rule. */
const GONE = new Set([19 /* ENODEV */, 3 /* ESRCH */, 2 /* ENOENT */]);

function attr(type: number, payload: Buffer): Buffer {
  const len = 4 + payload.length;
  const out = Buffer.alloc((len + 3) & ~3);
  out.writeUInt16LE(len, 0);
  out.writeUInt16LE(type, 2);
  payload.copy(out, 4);
  return out;
}

function u32(value: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(value >>> 0);
  return b;
}

function message(type: number, seq: number, body: Buffer): Buffer {
  const header = Buffer.alloc(16);
  header.writeUInt32LE(16 + body.length, 0);
  header.writeUInt16LE(type, 4);
  header.writeUInt16LE(NLM_F_REQUEST | NLM_F_ACK, 6);
  header.writeUInt32LE(seq, 8);
  return Buffer.concat([header, body]);
}

/** ifinfomsg (index 0) + IFLA_IFNAME: the kernel resolves the name. */
function linkByName(name: string): Buffer {
  return Buffer.concat([Buffer.alloc(16), attr(IFLA_IFNAME, Buffer.from(`${name}\0`))]);
}

/** fib_rule_hdr: family, dst_len, src_len, tos, table (u8), 2 reserved, action, flags (u32). */
function ruleHeader(srcLen: number, table: number): Buffer {
  const h = Buffer.alloc(12);
  h.writeUInt8(AF_INET, 0);
  h.writeUInt8(srcLen, 2);
  h.writeUInt8(table < 256 ? table : 0, 4);
  h.writeUInt8(FR_ACT_TO_TBL, 7);
  return h;
}

/** rtmsg for a delete: scope NOWHERE matches any; table and metric select the one route. */
function routeKey(table: number, metric: number): Buffer {
  const h = Buffer.alloc(12);
  h.writeUInt8(AF_INET, 0);
  h.writeUInt8(table < 256 ? table : 0, 4);
  h.writeUInt8(RT_SCOPE_NOWHERE, 6);
  return Buffer.concat([h, attr(RTA_TABLE, u32(table)), attr(RTA_PRIORITY, u32(metric))]);
}

type RawModule = typeof import('netlink/dist/raw.js');

async function loadRaw(): Promise<RawModule['RawNetlinkSocket']> {
  const raw = await import('netlink/dist/raw.js');
  return ((raw as RawModule & { default?: RawModule }).default ?? raw).RawNetlinkSocket;
}

/** One rtnetlink socket and sequential requests answered with the kernel's errno (0: done). */
class RawRtnl {
  private seq = (Date.now() & 0x3fffffff) >>> 0;

  constructor(private readonly socket: RawNetlinkSocket) {}

  request(type: number, body: Buffer, what: string): Promise<number> {
    const seq = ++this.seq;
    return new Promise<number>((resolve, reject) => {
      const done = (fn: () => void): void => {
        clearTimeout(timer);
        this.socket.off('message', onMessage);
        fn();
      };
      const onMessage = (msg: Buffer): void => {
        for (let off = 0; off + 16 <= msg.length; ) {
          const len = msg.readUInt32LE(off);
          if (len < 16) break;
          if (msg.readUInt16LE(off + 4) === NLMSG_ERROR && msg.readUInt32LE(off + 8) === seq) {
            const errno = -msg.readInt32LE(off + 16);
            done(() => resolve(errno));
            return;
          }
          off += (len + 3) & ~3;
        }
      };
      const timer = setTimeout(() => done(() => reject(new RtnlError(`${what} timed out`))), TIMEOUT_MS);
      this.socket.on('message', onMessage);
      this.socket.send(message(type, seq, body), { port: 0 }, (err) => {
        if (err) done(() => reject(new RtnlError(`failed to ${what}: ${err.message}`, err.code, { cause: err })));
      });
    });
  }

  /** A delete: 'absent' when the kernel says it is already gone, an error for any other refusal. */
  async remove(type: number, body: Buffer, what: string): Promise<'removed' | 'absent'> {
    const errno = await this.request(type, body, what);
    if (errno === 0) return 'removed';
    if (GONE.has(errno)) return 'absent';
    throw new RtnlError(`failed to ${what}: errno ${errno}`, String(errno));
  }

  close(): void {
    this.socket.close();
  }
}

function socketInNetns(Socket: RawModule['RawNetlinkSocket'], nsFd: number): RawNetlinkSocket {
  return inNetns(nsFd, () => new Socket(NETLINK_ROUTE));
}

function openPodNetns(path: string): number | undefined {
  if (path === '') return undefined;
  try {
    return openNetns(path);
  } catch (err) {
    if (err instanceof NetnsMissingError || err instanceof NotANetnsError) return undefined;
    throw err;
  }
}

/**
 * Removes what setupPodRouting made: the pod-side marks and return rule (while the pod's veth end still exists:
 * they were made with it), the veth (its routes on both ends go with it), the pod's route in the ENI table and
 * its rule. A missing netns means the veth went with it; the host-side rule and route are removed regardless.
 */
export async function teardownPodRouting(
  netnsPath: string,
  spec: TeardownSpec,
  options: {
    /** Given: the pod-side iptables removal is handed over still running, for the caller to await later. */
    readonly deferPodMarks?: (pending: Promise<unknown>) => void;
  } = {},
): Promise<void> {
  const needsTable = spec.mode !== 'l2' && spec.podIp !== undefined && spec.deviceIndex !== undefined;
  if (!spec.hostVeth && !needsTable) return;
  const Socket = await loadRaw();
  const host = new RawRtnl(new Socket(NETLINK_ROUTE));
  try {
    if (spec.hostVeth) {
      const nsFd = openPodNetns(netnsPath);
      if (nsFd !== undefined) {
        const pod = new RawRtnl(socketInNetns(Socket, nsFd));
        try {
          const podName = podVethName(spec.ifName);
          if ((await pod.request(RTM_GETLINK, linkByName(podName), `look up ${podName}`)) === 0) {
            const marks = startRemovePodConnmark(nsFd, podName, () => openPodNetns(netnsPath));
            if (options.deferPodMarks) options.deferPodMarks(marks);
            else await marks;
            await pod.remove(
              RTM_DELRULE,
              Buffer.concat([
                ruleHeader(0, POD_RETURN_TABLE),
                attr(FRA_FWMARK, u32(CONNMARK)),
                attr(FRA_FWMASK, u32(CONNMARK)),
                attr(FRA_TABLE, u32(POD_RETURN_TABLE)),
                attr(FRA_PRIORITY, u32(POD_FWMARK_RULE_PRIORITY)),
              ]),
              'delete the pod fwmark rule',
            );
          }
        } finally {
          pod.close();
          closeSync(nsFd);
        }
      }
      const hostName = hostVethName(spec.hostVeth.containerId, spec.ifName);
      await host.remove(RTM_DELLINK, linkByName(hostName), `delete veth ${hostName}`);
    }
    if (needsTable) {
      const table = tableForDevice(spec.tableBase, spec.deviceIndex!);
      const podIp = spec.podIp!;
      await host.remove(RTM_DELROUTE, routeKey(table, podMetric(podIp)), `delete the route of ${podIp} from ${table}`);
      await host.remove(
        RTM_DELRULE,
        Buffer.concat([
          ruleHeader(32, table),
          attr(FRA_SRC, ipv4Bytes(podIp)),
          attr(FRA_TABLE, u32(table)),
          attr(FRA_PRIORITY, u32(POD_RULE_PRIORITY)),
        ]),
        `delete the rule from ${podIp} lookup ${table}`,
      );
    }
  } finally {
    host.close();
  }
}
