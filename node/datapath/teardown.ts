import { createHash } from 'node:crypto';
import { closeSync } from 'node:fs';
import { NetnsMissingError, NotANetnsError, openNetns } from './netns.js';
import { linkByName, loadRawSocket, RawRtnl, RTM_DELLINK } from './rtnl.js';

/** The pod link's name until its rename: fixed per ifName, so a link a crash left under it is found by name. */
export function tempLinkName(ifName: string): string {
  return `vl${createHash('sha256').update(ifName).digest('hex').slice(0, 12)}`;
}

/**
 * Deletes the pod's link, and one an ADD that died before the rename left under its temp name, with RTM_DELLINK
 * on a raw rtnetlink socket opened in the pod's netns. DEL takes this path instead of the full datapath: it needs
 * neither the host socket nor the `netlink` package's generated struct code. Addresses and routes go with the link.
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
  let socket: RawRtnl | undefined;
  try {
    socket = RawRtnl.open(await loadRawSocket(), nsFd);
    const temp = tempLinkName(ifName);
    const left = await socket.remove(RTM_DELLINK, linkByName(temp), `delete ${temp} in ${netnsPath}`);
    const link = await socket.remove(RTM_DELLINK, linkByName(ifName), `delete ${ifName} in ${netnsPath}`);
    return left === 'removed' ? left : link;
  } finally {
    socket?.close();
    closeSync(nsFd);
  }
}
