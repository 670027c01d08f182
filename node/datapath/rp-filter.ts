import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { inNetns } from './native.js';
import { procSysNet } from './proc-sys-net.js';

/**
 * Reverse-path filtering. Distributions such as Amazon Linux set it strict (1) for every interface, and a pod
 * netns inherits that. Strict breaks the paths this datapath makes asymmetric on purpose: the host's `from <pod>`
 * rules (L3/L3S) send the reverse route of a pod's peers into the pod's ENI, so a service reply arriving on the
 * boot ENI or a host veth fails the check; and in the pod, a NodePort connection arrives on the host veth while
 * the route back to the client is the ipvlan link. Loose mode (2), as lyft and the AWS VPC CNI set it, keeps the
 * check against addresses that are not routable at all. The kernel applies max(all, interface), so only an
 * interface whose effective value is strict is changed.
 */

/** The interface names vpc-lease puts into a /proc/sys path or an iptables rule: no separator, no shell word. */
const IF_NAME = /^[A-Za-z0-9_.@-]{1,15}$/;

/** Guards the paths and rules built from an interface name (names come from the kernel or the plugin). */
export function assertIfName(ifName: string): void {
  if (!IF_NAME.test(ifName)) throw new RangeError(`bad interface name ${ifName}`);
}

function read(path: string): number {
  return Number(readFileSync(path, 'utf8').trim());
}

/** Makes one interface of the current netns loose when it is strict; names come from the kernel or the plugin. */
export function loosenRpFilter(ifName: string): boolean {
  assertIfName(ifName);
  const dir = `${procSysNet()}/ipv4/conf`;
  if (Math.max(read(`${dir}/all/rp_filter`), read(`${dir}/${ifName}/rp_filter`)) !== 1) return false;
  writeFileSync(`${dir}/${ifName}/rp_filter`, '2');
  return true;
}

/**
 * The veth ends carry no address, and the kernel drops a packet on an unnumbered interface whenever its reverse
 * route leaves through another one, in loose mode too (fib_validate_source: no address → last resort → drop).
 *
 * Host end: every packet a pod sends through it carries the 0x80 mark (connmark.ts) whose rule routes by main,
 * where the pod's /32 leads back to this veth; `src_valid_mark` makes the reverse lookup use that mark, instead
 * of the pods' `from <ip>` rules that point into an ENI (L3/L3S).
 */
export function validateHostVethByMark(ifName: string): void {
  assertIfName(ifName);
  writeFileSync(`${procSysNet()}/ipv4/conf/${ifName}/src_valid_mark`, '1');
}

/**
 * Pod end: a NodePort or same-node service connection arrives on it while the route back to the client is the
 * ipvlan link, so it must not be filtered at all. The effective value is max(all, interface): `all` is lowered
 * to 0 in the pod's own namespace after every other interface got the old `all` as its own value, so nothing
 * but the veth changes.
 */
export function unfilterPodVeth(nsFd: number, ifName: string): void {
  assertIfName(ifName);
  inNetns(nsFd, () => {
    const dir = `${procSysNet()}/ipv4/conf`;
    const all = read(`${dir}/all/rp_filter`);
    writeFileSync(`${dir}/${ifName}/rp_filter`, '0');
    if (all === 0) return;
    for (const name of readdirSync(dir)) {
      if (name === 'all' || name === ifName) continue;
      if (read(`${dir}/${name}/rp_filter`) < all) writeFileSync(`${dir}/${name}/rp_filter`, String(all));
    }
    writeFileSync(`${dir}/all/rp_filter`, '0');
  });
}
