import { closeSync } from 'node:fs';
import { NetnsMissingError, NotANetnsError, openNetns } from './netns.js';
import { linkByName, loadRawSocket, RawRtnl, RTM_DELLINK } from './rtnl.js';

/**
 * Deletes the pod's link with one RTM_DELLINK on a raw rtnetlink socket opened in the pod's netns. DEL takes this
 * path instead of the full datapath: it needs neither the host socket nor the `netlink` package's generated
 * struct code. Addresses and routes on the link go with it.
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
    return await socket.remove(RTM_DELLINK, linkByName(ifName), `delete ${ifName} in ${netnsPath}`);
  } finally {
    socket?.close();
    closeSync(nsFd);
  }
}
