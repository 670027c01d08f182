import type { RtNetlinkSocket } from 'netlink/dist/rt/rt.js';
import { parseIpv4 } from '../../shared/ipv4.js';
import { ipFamilyOf, parseIpv6 } from '../../shared/ipv6.js';
import {
  type AddressFamily,
  AF_INET,
  AF_INET6,
  afOf,
  CREATE_REPLACE,
  ipBytes,
  ipOf,
  REQUEST_TIMEOUT_MS,
  RTNH_F_ONLINK,
  rtnl,
  rtnlDelete,
} from './rtnl.js';

/**
 * L3/L3S: one route table per ENI. In these modes ipvlan hands a pod's outgoing packets to the master's
 * namespace, which routes them with the master as the forced output interface; the main table's default route
 * leaves through the boot ENI, so without a table of its own the lookup fails (or, worse, the packet leaves
 * through an ENI that does not own its source address and EC2's source/destination check drops it).
 *
 * Table number: `base + deviceIndex`. The device index is what EC2 fixes for the ENI's lifetime on the instance
 * (interface names and ifindexes are not stable), so every plugin process computes the same number without
 * coordination, and a reattached ENI at the same index reuses the same table.
 *
 * Lifetime without a lock: the table's content is one default route *per pod*, all via the gateway on the ENI's
 * interface, told apart by their metric, which is the pod's address as a number (unique on the node, since an
 * address is claimed by one attachment at a time). ADD adds its own route and DEL deletes only its own, so the
 * table exists exactly while some pod needs it — created with the first pod, gone with the last — and a
 * concurrent ADD and DEL on the same ENI can never delete each other's route. (A shared route removed "when no
 * rule points at the table any more" has a window between DEL's check and its delete in which an ADD can add its
 * rule and find its route deleted under it; plugin processes share no lock to close it.) The kernel picks the
 * lowest metric among identical default routes; which one is irrelevant, they are the same path.
 */
export const DEFAULT_ROUTE_TABLE_BASE = 1_000;
/** Table ids the kernel reserves (unspec, compat, default, main, local) never come out of `tableForDevice`. */
const RESERVED_TABLES = new Set([0, 252, 253, 254, 255]);

export function tableForDevice(base: number, deviceIndex: number): number {
  if (!Number.isInteger(deviceIndex) || deviceIndex < 1)
    throw new RangeError(`device index ${deviceIndex}: the boot ENI (0) is never used for pods`);
  const table = base + deviceIndex;
  if (RESERVED_TABLES.has(table) || table > 0xffff_fffe) throw new RangeError(`route table ${table} is reserved`);
  return table;
}

/**
 * The metric that tells this pod's default route apart from its neighbours' in the ENI's table. IPv6 (its own
 * FIB, so no clash with IPv4 metrics): the address's low 32 bits, unique among the pods of one ENI's /80 as the
 * launch hands them out from its start. Zero is refused: the kernel stores an IPv6 metric 0 as 1024, and a
 * delete keyed by metric 0 matches any route.
 */
export function podMetric(podIp: string): number {
  if (ipFamilyOf(podIp) === 'ipv4') return parseIpv4(podIp);
  const low = Number(parseIpv6(podIp) & 0xffff_ffffn);
  if (low === 0) throw new RangeError(`pod address ${podIp}: its low 32 bits are zero, which cannot key its route`);
  return low;
}

/** The default destination of a family, as CHECK prints it. */
function defaultDst(family: AddressFamily): string {
  return family === AF_INET6 ? '::/0' : '0.0.0.0/0';
}

export interface EniTableRoute {
  readonly table: number;
  readonly gateway: string;
  /** ifindex of the ENI's interface in the host namespace. */
  readonly masterIndex: number;
  readonly podIp: string;
}

/** rtm_table is 8 bits; larger ids travel in RTA_TABLE with rtm_table = RT_TABLE_UNSPEC, as iproute2 does. */
function tableHeader(table: number): number {
  return table < 256 ? table : 0;
}

/**
 * Adds the pod's default route to the ENI's table. ONLINK: the ENI's interface carries no address, so the
 * kernel cannot otherwise tell that the gateway is reachable on it. Replace, not exclusive create: the route is
 * keyed by the pod's own address, so one that exists is a leftover of this same attachment.
 */
export async function addEniRoute(host: RtNetlinkSocket, r: EniTableRoute): Promise<void> {
  await rtnl(`add the default route via ${r.gateway} to table ${r.table} for ${r.podIp}`, () =>
    host.newRoute(
      {
        family: afOf(r.podIp),
        dstLen: 0,
        table: tableHeader(r.table),
        protocol: 'BOOT',
        scope: 'UNIVERSE',
        type: 'UNICAST',
        flags: { __unknown: RTNH_F_ONLINK },
      },
      { table: r.table, gateway: ipBytes(afOf(r.podIp), r.gateway), oif: r.masterIndex, priority: podMetric(r.podIp) },
      { timeout: REQUEST_TIMEOUT_MS, flags: CREATE_REPLACE },
    ),
  );
}

/** Deletes only this pod's route (matched by table and metric); already gone is 'absent'. */
export async function deleteEniRoute(
  host: RtNetlinkSocket,
  r: Pick<EniTableRoute, 'table' | 'podIp'>,
): Promise<'removed' | 'absent'> {
  return rtnlDelete(`delete the route of ${r.podIp} from table ${r.table}`, () =>
    host.delRoute(
      { family: afOf(r.podIp), dstLen: 0, table: tableHeader(r.table), scope: 'NOWHERE' },
      { table: r.table, priority: podMetric(r.podIp) },
      { timeout: REQUEST_TIMEOUT_MS },
    ),
  );
}

export interface TableRoute {
  readonly dst: string;
  readonly gateway?: string;
  readonly oif?: number;
  readonly metric: number;
}

/** Every route of a family in one table (one dump; the kernel ignores a table filter on dumps without strict mode). */
export async function tableRoutes(
  host: RtNetlinkSocket,
  table: number,
  family: AddressFamily = AF_INET,
): Promise<TableRoute[]> {
  const routes = await rtnl(`list routes of table ${table}`, () =>
    host.getRoutes({ family }, undefined, { timeout: REQUEST_TIMEOUT_MS }),
  );
  return routes
    .filter((r) => r.data.family === family && (r.attrs.table ?? r.data.table) === table)
    .map((r) => {
      const gateway = ipOf(family, r.attrs.gateway);
      const dst = ipOf(family, r.attrs.dst);
      return {
        dst: dst ? `${dst}/${r.data.dstLen ?? 0}` : defaultDst(family),
        ...(gateway ? { gateway } : {}),
        ...(r.attrs.oif !== undefined ? { oif: r.attrs.oif } : {}),
        metric: r.attrs.priority ?? 0,
      };
    });
}

/** Whether the pod's own default route is in the ENI's table, through the expected gateway and interface. */
export function hasPodRoute(routes: readonly TableRoute[], r: EniTableRoute): boolean {
  return routes.some(
    (x) =>
      x.dst === defaultDst(afOf(r.podIp)) &&
      x.metric === podMetric(r.podIp) &&
      x.gateway === r.gateway &&
      x.oif === r.masterIndex,
  );
}
