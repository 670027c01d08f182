import { readFileSync, writeFileSync } from 'node:fs';
import { inNetns } from './native.js';

/**
 * Reverse-path filtering. Distributions such as Amazon Linux set it strict (1) for every interface, and a pod
 * netns inherits that. Strict breaks the paths this datapath makes asymmetric on purpose: the host's `from <pod>`
 * rules (L3/L3S) send the reverse route of a pod's peers into the pod's ENI, so a service reply arriving on the
 * boot ENI or a host veth fails the check; and in the pod, a NodePort connection arrives on the host veth while
 * the route back to the client is the ipvlan link. Loose mode (2), as lyft and the AWS VPC CNI set it, keeps the
 * check against addresses that are not routable at all. The kernel applies max(all, interface), so only an
 * interface whose effective value is strict is changed.
 */
function read(path: string): number {
  return Number(readFileSync(path, 'utf8').trim());
}

/** Makes one interface of the current netns loose when it is strict; names come from the kernel or the plugin. */
export function loosenRpFilter(ifName: string): boolean {
  if (!/^[A-Za-z0-9_.@-]{1,15}$/.test(ifName)) throw new RangeError(`bad interface name ${ifName}`);
  const dir = '/proc/sys/net/ipv4/conf';
  if (Math.max(read(`${dir}/all/rp_filter`), read(`${dir}/${ifName}/rp_filter`)) !== 1) return false;
  writeFileSync(`${dir}/${ifName}/rp_filter`, '2');
  return true;
}

/** The same in another netns (the pod's): /proc/sys/net belongs to the namespace of the thread that opens it. */
export function loosenRpFilterIn(nsFd: number, ifName: string): boolean {
  return inNetns(nsFd, () => loosenRpFilter(ifName));
}
