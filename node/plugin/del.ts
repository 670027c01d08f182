import type { Lease } from '../../shared/domain/lease.js';
import { ipFamilyOf } from '../../shared/ipv6.js';
import type { CniOutput } from '../cni/skel.js';
import { checkNetns } from '../datapath/netns.js';
import { teardownPodRouting } from '../datapath/routing-teardown.js';
import { deletePodLink } from '../datapath/teardown.js';
import { type AttachmentLock, lockAttachment } from '../journal/lock.js';
import { classify } from './classify.js';
import type { CallContext } from './context.js';
import { routingTeardown } from './routing.js';

/**
 * DEL is idempotent (kubernetes#43014): a missing netns, link, record or lease is success. With the journal's
 * address the release is one conditional UpdateItem; without it the store looks the holder up first. The link
 * goes first, so a retried DEL after a store outage finds nothing half-done in the pod.
 */
export async function cmdDel(ctx: CallContext): Promise<CniOutput> {
  const { request: req, config, journal, log } = ctx;
  let lock: AttachmentLock | undefined;
  try {
    const marks: Record<string, number> = { start: performance.now() };
    // After an ADD of the same attachment, never beside it: it could claim or build after this DEL released.
    lock = await lockAttachment(config.dataDir, req.containerId, req.ifName, config.attachmentLockWaitMs);
    const record = journal.read(req.containerId, req.ifName);
    const netns = req.netns || record?.netns || '';
    let link: 'removed' | 'absent' = 'absent';
    // A pod whose netns is already gone took its link with it: no need to load netlink at all.
    if (netns !== '' && netnsExists(netns)) link = await deletePodLink(netns, req.ifName);
    // Rule, table route and host veth go before the release: once released (with no cooldown) the address may be
    // claimed by a parallel ADD, whose identical rule this DEL would then delete.
    const routing = routingTeardown(config, req, {
      ip: record?.ip,
      deviceIndex: record?.placement?.deviceIndex,
      ipv6: record?.ipv6?.ip,
    });
    // The pod-side iptables removal runs on while the store answers; awaited before DEL reports success.
    const pending: Promise<unknown>[] = [];
    const defer = (p: Promise<unknown>): void => {
      p.catch(() => undefined); // awaited below; if the release fails first, DEL reports that error instead
      pending.push(p);
    };
    if (routing) await teardownPodRouting(netns, routing, { deferPodMarks: defer });
    marks['teardown'] = performance.now();
    const identity = await ctx.identity();
    const store = await ctx.store();
    const holder = { containerId: req.containerId, ifName: req.ifName };
    const released = await store.release(identity.instanceArn, holder, ctx.nowMs(), config.reuseWaitMs, record?.ip);
    // A dual pod's IPv6 lease, by its recorded address. Lookups by the holder below find it when it is unknown.
    const releasedV6 = record?.ipv6
      ? await store.release(identity.instanceArn, holder, ctx.nowMs(), config.reuseWaitMs, record.ipv6.ip)
      : undefined;
    // The journal knew an address that is not ours (anymore): a stale record; make sure by asking for the holder.
    // Without a record, a dual pod (or one whose ADD crashed between its claims) may hold a second lease.
    const fallback =
      !released && record?.ip
        ? await store.release(identity.instanceArn, holder, ctx.nowMs(), config.reuseWaitMs)
        : undefined;
    const found: Lease[] = [];
    const lookups = config.ipFamily === 'dual' && !(released && releasedV6) ? 2 : 0;
    for (let i = 0; i < lookups; i++) {
      const lease = await store.release(identity.instanceArn, holder, ctx.nowMs(), config.reuseWaitMs);
      if (!lease) break;
      found.push(lease);
    }
    // Without a record the address was unknown until the store released it; its rule and table route go now
    // (the IPv4 lease's: the host veth and the L3 rules route IPv4).
    const all = [released, fallback, ...found].filter((l): l is Lease => l !== undefined);
    const releasedLease = all.find((l) => ipFamilyOf(l.ip) === 'ipv4') ?? all[0];
    if (routing && routing.podIp === undefined && releasedLease)
      await teardownPodRouting(netns, { ...routing, ...routingTeardown(config, req, releasedLease) });
    await Promise.all(pending);
    journal.remove(req.containerId, req.ifName);
    marks['release'] = performance.now();
    const sinceStartMs = Object.fromEntries(Object.entries(marks).map(([k, v]) => [k, Math.round(v)]));
    const v6 = releasedV6 ?? all.find((l) => ipFamilyOf(l.ip) === 'ipv6');
    log.info('deleted', { link, released: releasedLease?.ip ?? null, ...(v6 ? { ipv6: v6.ip } : {}), sinceStartMs });
    return undefined;
  } catch (err) {
    log.error('DEL failed', { err });
    throw classify(err);
  } finally {
    await lock?.release();
  }
}

function netnsExists(path: string): boolean {
  try {
    checkNetns(path);
    return true;
  } catch {
    return false;
  }
}
