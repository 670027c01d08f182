import { type Lease, sameHolder } from '../../shared/domain/lease.js';
import { findPodLeases } from '../../shared/lease-store/claim-pair.js';
import { CniCode, CniError } from '../cni/errors.js';
import { parsePrevResult } from '../cni/result.js';
import type { CniOutput } from '../cni/skel.js';
import { subnetPrefixLength } from '../datapath/port.js';
import { verifyAttachment } from '../datapath/verify.js';
import { classify } from './classify.js';
import type { CallContext } from './context.js';
import { podLinkSpec } from './link-spec.js';

function mismatch(what: string): CniError {
  return new CniError(CniCode.checkFailed, 'CHECK failed', what);
}

/**
 * CHECK: the attachment is still what ADD made — the lease (a dual pod: both) is CLAIMED by this (containerId, ifName), the ENI's
 * interface is on the host, the pod's link is up with the address and the default route, and the runtime's
 * prevResult names the same interface and address.
 */
export async function cmdCheck(ctx: CallContext): Promise<CniOutput> {
  const { request: req, config, journal, log } = ctx;
  try {
    if (req.netconf['prevResult'] === undefined)
      throw new CniError(CniCode.invalidConfig, 'CHECK needs the prevResult of the ADD');
    const prev = parsePrevResult(req.netconf['prevResult']);
    const identity = await ctx.identity();
    const store = await ctx.store();
    const record = journal.read(req.containerId, req.ifName);
    const family = config.ipFamily;
    const recorded = [record?.ip, record?.ipv6?.ip].filter((ip): ip is string => ip !== undefined);
    const leases = (
      recorded.length > 0
        ? await Promise.all(recorded.map((ip) => store.getLease(identity.instanceArn, ip)))
        : await findPodLeases(store, identity.instanceArn, req.containerId, req.ifName, family)
    ).filter((l): l is Lease => l !== undefined);
    const wanted = family === 'dual' ? 2 : 1;
    if (leases.length < wanted)
      throw mismatch(`${req.containerId}/${req.ifName} holds ${leases.length} of its ${wanted} leases (${family})`);
    for (const lease of leases)
      if (lease.state !== 'CLAIMED' || !lease.holder || !sameHolder(lease.holder, ctx.holder))
        throw mismatch(`lease ${lease.ip} is ${lease.state}, not held by ${req.containerId}/${req.ifName}`);
    const [lease, v6] = leases as [Lease, Lease | undefined];
    const ifIndex = prev.interfaces.findIndex((i) => i.name === req.ifName && i.sandbox === req.netns);
    if (ifIndex < 0) throw mismatch(`prevResult has no interface ${req.ifName} in ${req.netns}`);
    for (const l of leases) {
      const cidr = `${l.ip}/${subnetPrefixLength(l.subnetCidr)}`;
      if (!prev.ips.some((ip) => ip.address === cidr && (ip.interface === undefined || ip.interface === ifIndex)))
        throw mismatch(`prevResult does not list ${cidr} on ${req.ifName}`);
    }

    const datapath = await ctx.datapath();
    const found = await verifyAttachment(datapath, podLinkSpec(ctx, lease, v6), ctx.hooks.linkKind);
    if (found.problems.length > 0) throw mismatch(found.problems.join('; '));
    const prevMac = prev.interfaces[ifIndex]?.mac;
    if (prevMac !== undefined && prevMac !== found.link?.mac)
      throw mismatch(`link MAC ${found.link?.mac ?? 'unknown'} is not ${prevMac}`);
    log.info('checked', { ips: leases.map((l) => l.ip) });
    return undefined;
  } catch (err) {
    log.warn('CHECK failed', { err });
    throw classify(err);
  }
}
