import { writeFileSync } from 'node:fs';
import type { RtNetlinkSocket } from 'netlink/dist/rt/rt.js';
import type { LinkMessage } from 'netlink/dist/rt/structs.js';
import type { Logger } from '../../shared/log.js';
import { CniCode, CniError } from '../cni/errors.js';
import { procSysNet } from './proc-sys-net.js';
import { assertIfName } from './rp-filter.js';
import { REQUEST_TIMEOUT_MS, rtnl } from './rtnl.js';

/**
 * The pod ENI's own link in the host namespace. EC2 hot-plugs an ENI down, without an address and at the driver's
 * MTU (1500); on EKS images nothing else brings it up, so ADD does, at the MTU EC2's DHCP gives every ENI of a
 * jumbo-frame instance type inside the VPC. vpc-lease never takes an ENI down: see node/deploy/host/README.md.
 */

/** The MTU EC2 gives an ENI inside the VPC (DHCP option 26 on every current-generation instance type). */
export const EC2_ENI_MTU = 9001;

/** What CHECK and a repeated ADD need to know about the ENI's link. */
export interface EniLinkState {
  readonly name: string;
  readonly up: boolean;
  readonly mtu: number;
}

export function eniLinkState(link: LinkMessage): EniLinkState {
  return {
    name: link.attrs.ifname ?? `#${link.data.index}`,
    up: link.data.flags?.up === true,
    mtu: link.attrs.mtu ?? 0,
  };
}

/** The boot ENI (device index 0) carries the host's own address: never used for pods, never reconfigured. */
export function refuseBootEni(deviceIndex: number, mac: string): void {
  if (deviceIndex === 0)
    throw new CniError(
      CniCode.datapathFailure,
      `refusing the lease's ENI ${mac}: it is at device index 0, the boot ENI, which vpc-lease never uses for pods`,
    );
}

/**
 * Brings a down ENI up at EC2's MTU and returns the MTU it has now. An ENI that is already up is left as it is
 * (its pods depend on its MTU). The check and the change are not atomic, so two ADDs on one down ENI may both
 * send the change: it is one RTM_SETLINK with the same MTU and flag, which the kernel applies under RTNL as a
 * whole, so the second is a no-op and no ADD ever sees the ENI up at the wrong MTU.
 */
export async function bringEniUp(host: RtNetlinkSocket, eni: LinkMessage, log: Logger): Promise<number> {
  const state = eniLinkState(eni);
  if (state.up) return state.mtu;
  ignoreRouterAdvertisements(state.name);
  const index = eni.data.index;
  await rtnl(`bring ENI interface ${state.name} up at MTU ${EC2_ENI_MTU}`, () =>
    host.setLink(
      { index, flags: { up: true }, change: { up: true } },
      { mtu: EC2_ENI_MTU },
      { timeout: REQUEST_TIMEOUT_MS },
    ),
  );
  log.info('brought the ENI interface up', { link: state.name, mtuWas: state.mtu, mtu: EC2_ENI_MTU });
  return EC2_ENI_MTU;
}

/**
 * In an IPv6 subnet the VPC router advertises itself on every ENI: accepted on a pod ENI, the host would add a
 * second default route whose packets (sourced from the boot ENI's address) EC2 drops. Missing when IPv6 is off.
 */
function ignoreRouterAdvertisements(ifName: string): void {
  assertIfName(ifName);
  try {
    writeFileSync(`${procSysNet()}/ipv6/conf/${ifName}/accept_ra`, '0');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}
