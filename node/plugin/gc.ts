import { existsSync } from 'node:fs';
import type { Lease } from '../../shared/domain/lease.js';
import { CniCode, CniError } from '../cni/errors.js';
import type { CniOutput } from '../cni/skel.js';
import { teardownPodRouting } from '../datapath/routing-teardown.js';
import { AttachmentBusyError, type AttachmentLock, lockAttachment } from '../journal/lock.js';
import { classify } from './classify.js';
import type { CallContext } from './context.js';
import { routingTeardown } from './routing.js';

interface Attachment {
  readonly containerId: string;
  readonly ifName: string;
}

function validAttachments(raw: unknown): Attachment[] {
  // Without the list we cannot tell live from dead: refuse rather than release everything.
  if (!Array.isArray(raw))
    throw new CniError(CniCode.invalidConfig, 'GC needs cni.dev/valid-attachments', 'expected a list');
  return raw.map((a, n) => {
    const entry = a as { containerID?: unknown; ifname?: unknown };
    if (!a || typeof entry.containerID !== 'string' || typeof entry.ifname !== 'string')
      throw new CniError(CniCode.invalidConfig, `cni.dev/valid-attachments[${n}] needs containerID and ifname`);
    return { containerId: entry.containerID, ifName: entry.ifname };
  });
}

/**
 * Whether a lease belongs to this GC's network. The runtime lists only this network's attachments, so another
 * vpc-lease network's leases (Multus) must be left alone. A lease claimed before holders recorded their network
 * is adopted only when the netconf says this node runs one vpc-lease network (`gcUnnamedLeases`).
 */
function ours(lease: Lease, network: string, adoptUnnamed: boolean): boolean {
  const claimedBy = lease.holder?.network;
  return claimedBy === undefined ? adoptUnnamed : claimedBy === network;
}

/**
 * Runs `fn` holding the attachment's lock, or returns false at once when a call of that attachment holds it: a
 * stalled ADD past the grace could otherwise finish wiring an address GC just released.
 */
async function unlessBusy(dataDir: string, holder: Attachment, fn: () => Promise<void>): Promise<boolean> {
  let lock: AttachmentLock;
  try {
    lock = await lockAttachment(dataDir, holder.containerId, holder.ifName, 0);
  } catch (err) {
    if (err instanceof AttachmentBusyError) return false;
    throw err;
  }
  try {
    await fn();
    return true;
  } finally {
    await lock.release();
  }
}

/**
 * GC (CNI 1.1): releases every lease of this node CLAIMED by an attachment of this network that the runtime no
 * longer lists, and drops their journal records. A lease claimed within `gcGraceMs` is spared — an ADD still in
 * flight is not in the runtime's list yet, and releasing it would hand one address to two pods.
 */
export async function cmdGc(ctx: CallContext): Promise<CniOutput> {
  const { request: req, config, journal, log } = ctx;
  try {
    const valid = validAttachments(req.netconf['cni.dev/valid-attachments']);
    const live = new Set(valid.map((a) => `${a.containerId}\u0000${a.ifName}`));
    const isLive = (containerId: string, ifName: string): boolean => live.has(`${containerId}\u0000${ifName}`);
    const identity = await ctx.identity();
    const store = await ctx.store();
    const nowMs = ctx.nowMs();
    const claimed = await store.listLeases(identity.instanceArn, { state: 'CLAIMED' });
    let released = 0;
    let spared = 0;
    let foreign = 0;
    let busy = 0;
    for (const lease of claimed) {
      const holder = lease.holder;
      if (!holder || isLive(holder.containerId, holder.ifName)) continue;
      if (!ours(lease, config.name, config.gcUnnamedLeases)) {
        foreign += 1;
        continue;
      }
      if ((lease.claimedAtMs ?? 0) > nowMs - config.gcGraceMs) {
        spared += 1;
        continue;
      }
      const done = await unlessBusy(config.dataDir, holder, async () => {
        if (holder.netns && existsSync(holder.netns)) {
          await (await ctx.datapath()).teardown(holder.netns, holder.ifName);
        }
        const routing = routingTeardown(config, holder, lease);
        if (routing) await teardownPodRouting(holder.netns ?? '', routing);
        const out = await store.release(identity.instanceArn, holder, nowMs, config.reuseWaitMs, lease.ip);
        if (out) released += 1;
        journal.remove(holder.containerId, holder.ifName);
      });
      if (!done) busy += 1;
    }
    let records = 0;
    for (const record of journal.list()) {
      if (isLive(record.containerId, record.ifName) || record.createdAtMs > nowMs - config.gcGraceMs) continue;
      if (claimed.some((l) => l.holder?.containerId === record.containerId && l.holder.ifName === record.ifName))
        continue;
      if (await unlessBusy(config.dataDir, record, async () => journal.remove(record.containerId, record.ifName)))
        records += 1;
    }
    log.info('garbage collected', { released, spared, busy, foreign, records, valid: valid.length });
    return undefined;
  } catch (err) {
    log.error('GC failed', { err });
    throw classify(err);
  }
}
