import { closeSync } from 'node:fs';
import { CONNMARK, POD_FWMARK_RULE_PRIORITY, POD_RETURN_TABLE } from './connmark.js';
import { EGRESS_RULE_PRIORITY, findEgressAddress, releaseEgressAddress } from './egress4.js';
import { hostVethName, podVethName } from './host-veth.js';
import { NetnsMissingError, NotANetnsError, openNetns } from './netns.js';
import { removePodMarks } from './pod-marks.js';
import { POD_RULE_PRIORITY } from './pod-rules.js';
import type { IpvlanMode } from './port.js';
import { podMetric, tableForDevice } from './route-tables.js';
import {
  type AddressFamily,
  AF_INET,
  AF_INET6,
  afOf,
  attr,
  cString,
  ipBytes,
  linkByName,
  loadRawSocket,
  RawRtnl,
  RT_TABLE_MAIN,
  RTM_DELLINK,
  RTM_DELROUTE,
  RTM_DELRULE,
  RTM_GETLINK,
  u32le,
} from './rtnl.js';

/**
 * DEL's half of pod-routing.ts, on raw rtnetlink messages: like the link deletion in teardown.ts, DEL needs
 * neither the `netlink` package's generated struct code nor a dump — every object is deleted by its key (rule
 * by source, table and priority; the pod's table route by table and metric; the veth by name), and "already
 * gone" is success, as DEL must be idempotent. ADD's undo uses the same path.
 */
export interface TeardownSpec {
  readonly mode: IpvlanMode;
  readonly ifName: string;
  /** The pod's address (IPv4, or IPv6 on an `ipv6` node), and a dual pod's IPv6 address beside it. */
  readonly podIp?: string;
  readonly podIpv6?: string;
  readonly deviceIndex?: number;
  readonly tableBase: number;
  readonly hostVeth?: { readonly containerId: string; readonly egress4Dir?: string };
}

const RTA_PRIORITY = 6;
const RTA_TABLE = 15;
const FRA_SRC = 2;
const FRA_IIFNAME = 3;
const FRA_PRIORITY = 6;
const FRA_FWMARK = 10;
const FRA_TABLE = 15;
const FRA_FWMASK = 16;
const RT_SCOPE_NOWHERE = 255;
const FR_ACT_TO_TBL = 1;

/** fib_rule_hdr: family, dst_len, src_len, tos, table (u8), 2 reserved, action, flags (u32). */
function ruleHeader(srcLen: number, table: number, family: AddressFamily = AF_INET): Buffer {
  const h = Buffer.alloc(12);
  h.writeUInt8(family, 0);
  h.writeUInt8(srcLen, 2);
  h.writeUInt8(table < 256 ? table : 0, 4);
  h.writeUInt8(FR_ACT_TO_TBL, 7);
  return h;
}

/** rtmsg for a delete: scope NOWHERE matches any; table and metric select the one route. */
function routeKey(table: number, metric: number, family: AddressFamily): Buffer {
  const h = Buffer.alloc(12);
  h.writeUInt8(family, 0);
  h.writeUInt8(table < 256 ? table : 0, 4);
  h.writeUInt8(RT_SCOPE_NOWHERE, 6);
  return Buffer.concat([h, attr(RTA_TABLE, u32le(table)), attr(RTA_PRIORITY, u32le(metric))]);
}

/** The pod's `fwmark 0x80/0x80 lookup 117` rule of one family, by its key. */
function returnRuleKey(family: AddressFamily): Buffer {
  return Buffer.concat([
    ruleHeader(0, POD_RETURN_TABLE, family),
    attr(FRA_FWMARK, u32le(CONNMARK)),
    attr(FRA_FWMASK, u32le(CONNMARK)),
    attr(FRA_TABLE, u32le(POD_RETURN_TABLE)),
    attr(FRA_PRIORITY, u32le(POD_FWMARK_RULE_PRIORITY)),
  ]);
}

/** An IPv6-only pod's `from <egress> iif <host veth> lookup main` rule (egress4.ts), by its key. */
function egressRuleKey(egress: string, hostName: string): Buffer {
  return Buffer.concat([
    ruleHeader(32, RT_TABLE_MAIN),
    attr(FRA_SRC, ipBytes(AF_INET, egress)),
    attr(FRA_IIFNAME, cString(hostName)),
    attr(FRA_TABLE, u32le(RT_TABLE_MAIN)),
    attr(FRA_PRIORITY, u32le(EGRESS_RULE_PRIORITY)),
  ]);
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
    /** Given: the pod-side marks' removal is handed over still running, for the caller to await later. */
    readonly deferPodMarks?: (pending: Promise<unknown>) => void;
  } = {},
): Promise<void> {
  const needsTable = spec.mode !== 'l2' && spec.podIp !== undefined && spec.deviceIndex !== undefined;
  if (!spec.hostVeth && !needsTable) return;
  const Socket = await loadRawSocket();
  const host = RawRtnl.open(Socket);
  try {
    if (spec.hostVeth) {
      const nsFd = openPodNetns(netnsPath);
      if (nsFd !== undefined) {
        const pod = RawRtnl.open(Socket, nsFd);
        try {
          const podName = podVethName(spec.ifName);
          if ((await pod.request(RTM_GETLINK, linkByName(podName), `look up ${podName}`)) === 0) {
            // An IPv6-only pod has no IPv4 marks (its egress address gets none), an IPv4 pod no IPv6 ones.
            const v6Only = spec.podIp !== undefined && afOf(spec.podIp) === AF_INET6;
            const families: AddressFamily[] = [];
            if (!v6Only) families.push(AF_INET);
            if (v6Only || spec.podIpv6 !== undefined) families.push(AF_INET6);
            const marks = removePodMarks(nsFd, podName, families);
            if (options.deferPodMarks) options.deferPodMarks(marks);
            else await marks;
            if (v6Only || spec.podIpv6 !== undefined)
              await pod.remove(RTM_DELRULE, returnRuleKey(AF_INET6), 'delete the pod IPv6 fwmark rule');
            await pod.remove(RTM_DELRULE, returnRuleKey(AF_INET), 'delete the pod fwmark rule');
          }
        } finally {
          pod.close();
          closeSync(nsFd);
        }
      }
      const hostName = hostVethName(spec.hostVeth.containerId, spec.ifName);
      await host.remove(RTM_DELLINK, linkByName(hostName), `delete veth ${hostName}`);
      const egressDir = spec.hostVeth.egress4Dir;
      const egress = egressDir && findEgressAddress(egressDir, spec.hostVeth.containerId, spec.ifName);
      // Rules first: the address may be claimed again the moment its file is gone.
      if (egress)
        await host.remove(RTM_DELRULE, egressRuleKey(egress, hostName), `delete the egress rule from ${egress}`);
      if (egressDir) releaseEgressAddress(egressDir, spec.hostVeth.containerId, spec.ifName);
    }
    if (needsTable) {
      const table = tableForDevice(spec.tableBase, spec.deviceIndex!);
      for (const podIp of [spec.podIp!, ...(spec.podIpv6 ? [spec.podIpv6] : [])]) {
        const family = afOf(podIp);
        await host.remove(
          RTM_DELROUTE,
          routeKey(table, podMetric(podIp), family),
          `delete the route of ${podIp} from ${table}`,
        );
        await host.remove(
          RTM_DELRULE,
          Buffer.concat([
            ruleHeader(family === AF_INET6 ? 128 : 32, table, family),
            attr(FRA_SRC, ipBytes(family, podIp)),
            attr(FRA_TABLE, u32le(table)),
            attr(FRA_PRIORITY, u32le(POD_RULE_PRIORITY)),
          ]),
          `delete the rule from ${podIp} lookup ${table}`,
        );
      }
    }
  } finally {
    host.close();
  }
}
