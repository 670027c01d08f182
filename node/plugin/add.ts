import type { Lease } from '../../shared/domain/lease.js';
import { sameHolder } from '../../shared/domain/lease.js';
import { DynamoServiceError, isTransient } from '../../shared/dynamo/errors.js';
import { StoreUnavailableError } from '../../shared/errors.js';
import { parseCidr } from '../../shared/ipv4.js';
import { CniCode, CniError } from '../cni/errors.js';
import type { CniResult } from '../cni/result.js';
import { appendResult, formatResult, parsePrevResult } from '../cni/result.js';
import type { CniOutput } from '../cni/skel.js';
import type { PluginConfig } from '../config/netconf.js';
import { checkNetns } from '../datapath/netns.js';
import type { PodLink, PodLinkSpec } from '../datapath/port.js';
import { teardownPodRouting } from '../datapath/routing-teardown.js';
import { faultPoint } from '../datapath/test-hooks.js';
import { UndoStack } from '../datapath/undo.js';
import { verifyAttachment } from '../datapath/verify.js';
import { type AttachmentLock, lockAttachment } from '../journal/lock.js';
import { classify } from './classify.js';
import type { CallContext } from './context.js';
import { podRouting, routingTeardown } from './routing.js';

/**
 * ADD, in the order the protocol reads: the attachment's lock → journal intent → claim (Query + UpdateItem, nothing else on the store)
 * → journal the address → build the link in the pod → print the result. Every step pushes its undo; a failure
 * anywhere releases the claim, removes the link and the record, and reports the original error.
 */
export async function cmdAdd(ctx: CallContext): Promise<CniOutput> {
  const { request: req, config, journal, log } = ctx;
  const prev = req.netconf['prevResult'] !== undefined ? parsePrevResult(req.netconf['prevResult']) : undefined;
  const undo = new UndoStack(log);
  let lock: AttachmentLock | undefined;
  try {
    // Before anything changes: a bad netns path is the caller's mistake and must leave no trace.
    checkNetns(req.netns);
    const marks: Record<string, number> = { start: performance.now() };
    // Two ADDs of one attachment never run side by side, however long the first hangs (the runtime's retry).
    lock = await lockAttachment(config.dataDir, req.containerId, req.ifName, config.attachmentLockWaitMs);
    const identity = await ctx.identity();
    const store = await ctx.store();
    marks['identity'] = performance.now();
    const arn = identity.instanceArn;
    const holder = ctx.holder;
    const nowMs = ctx.nowMs();

    let lease: Lease | undefined;
    let reused = false;
    const fresh = journal.createIntent({
      containerId: req.containerId,
      ifName: req.ifName,
      netns: req.netns,
      createdAtMs: nowMs,
      pid: process.pid,
    });
    if (!fresh) {
      // A repeated ADD (its predecessor finished or died: we hold the lock). A complete record costs one GetItem
      // to confirm; an intent alone means a crash between the claim and its record, so ask the store.
      const record = journal.read(req.containerId, req.ifName);
      if (record?.ip) {
        const held = await store.getLease(arn, record.ip);
        if (held?.state === 'CLAIMED' && held.holder && sameHolder(held.holder, holder)) lease = held;
      }
      lease ??= await store.findByHolder(arn, req.containerId, req.ifName);
      reused = lease !== undefined;
      log.info('repeated ADD', { recorded: record?.ip, found: lease?.ip });
    }
    // From here the record is ours (fresh, or a finished or crashed ADD of the same attachment).
    // Kept when a claim's outcome stays unknown: the intent then tells the next ADD or DEL of this attachment to
    // look the holder up, so a claim that landed is found (reused or released), never left beside a second one.
    let keepIntent = false;
    undo.push('journal-intent', () => {
      if (!keepIntent) journal.remove(req.containerId, req.ifName);
    });
    faultPoint(ctx.hooks, 'journal-intent');

    // Load netlink (CPU-bound) while the claim's requests are on the wire; setImmediate lets them leave first.
    const datapathReady = new Promise<void>((resolve) => setImmediate(resolve)).then(() => ctx.datapath());
    datapathReady.catch(() => undefined); // awaited below; a failure is reported there, not as unhandled
    if (!lease) {
      try {
        lease = await store.claim(arn, holder, nowMs, { checkExisting: false });
      } catch (err) {
        // A claim that failed on the wire may still have landed (the write done, every answer lost): give back
        // whatever this attachment holds, or the runtime's retry of this ADD finds its own address taken.
        if (err instanceof StoreUnavailableError)
          await store.release(arn, holder, ctx.nowMs(), config.reuseWaitMs).catch(() => {
            keepIntent = true;
          });
        throw err;
      }
    }
    marks['claim'] = performance.now();
    const claimed = lease;
    undo.push('claim', async () => {
      await store.release(arn, holder, ctx.nowMs(), config.reuseWaitMs, claimed.ip);
    });
    faultPoint(ctx.hooks, 'claim');

    // Synced while the datapath is built; awaited before the result (and by the undo, before it removes it).
    const recorded = journal.write({
      containerId: req.containerId,
      ifName: req.ifName,
      netns: req.netns,
      createdAtMs: nowMs,
      ip: claimed.ip,
      placement: {
        eniId: claimed.eniId,
        deviceIndex: claimed.deviceIndex,
        mac: claimed.mac,
        subnetId: claimed.subnetId,
        subnetCidr: claimed.subnetCidr,
        gateway: claimed.gateway,
      },
    });
    recorded.catch(() => undefined); // awaited below or by the undo
    undo.push('journal-record', () => recorded.catch(() => undefined));
    faultPoint(ctx.hooks, 'journal-record');

    const prefixLength = parseCidr(claimed.subnetCidr).prefixLength;
    const datapath = await datapathReady;
    marks['netlink'] = performance.now();
    const routing = podRouting(config, req.containerId, claimed.deviceIndex);
    const spec: PodLinkSpec = {
      netnsPath: req.netns,
      ifName: req.ifName,
      masterMac: claimed.mac,
      deviceIndex: claimed.deviceIndex,
      ip: claimed.ip,
      prefixLength,
      gateway: claimed.gateway,
      mtu: config.mtu,
      mode: config.mode,
      ...(routing ? { routing } : {}),
    };
    let link: PodLink | undefined;
    if (reused) {
      // The runtime repeats an ADD when it doubts the first: keep the attachment only if all of it is intact
      // (link, rule, table route, host veth), else remove what is left and build it again.
      const found = await verifyAttachment(datapath, spec, ctx.hooks.linkKind);
      if (found.problems.length === 0 && found.link)
        link = { ifName: req.ifName, mac: found.link.mac, mtu: found.link.mtu, sandbox: req.netns };
      else {
        log.warn('repeated ADD: rebuilding the attachment', { problems: found.problems });
        await datapath.teardown(req.netns, req.ifName);
        const teardown = routingTeardown(config, req, claimed);
        if (teardown) await teardownPodRouting(req.netns, teardown);
      }
    }
    if (!link) {
      // The other pods on this ENI's interface: setup refuses to re-mode an ipvlan master they already share.
      const peers = journal
        .list()
        .filter(
          (r) => r.placement?.mac === claimed.mac && !(r.containerId === req.containerId && r.ifName === req.ifName),
        )
        .map((r) => ({ netnsPath: r.netns, ifName: r.ifName }));
      link = await datapath.setup({ ...spec, peers });
    }
    // Also for a link a previous ADD built: the claim is released on failure, so its address must go too.
    undo.push('datapath', async () => {
      await datapath.teardown(req.netns, req.ifName);
      const routing = routingTeardown(config, req, claimed);
      if (routing) await teardownPodRouting(req.netns, routing);
    });

    const ours: CniResult = {
      interfaces: [{ name: link.ifName, mac: link.mac, mtu: link.mtu, sandbox: link.sandbox }],
      ips: [{ address: `${claimed.ip}/${prefixLength}`, gateway: claimed.gateway, interface: 0 }],
      routes: [{ dst: '0.0.0.0/0', gw: claimed.gateway }],
      dns: {},
    };
    await recorded;
    marks['datapath'] = performance.now();
    faultPoint(ctx.hooks, 'print-result');
    undo.commit();
    // Milliseconds since the process started, per phase: where a slow ADD spent its time.
    const sinceStartMs = Object.fromEntries(Object.entries(marks).map(([k, v]) => [k, Math.round(v)]));
    log.info('added', { ip: claimed.ip, eniId: claimed.eniId, reused, identity: identity.source, sinceStartMs });
    return formatResult(prev ? appendResult(prev, ours) : ours, req.version);
  } catch (err) {
    await undo.unwind(err);
    const reported = classify(storeFailure(err, config));
    log.error('ADD failed', {
      err,
      ...(reported instanceof CniError ? { code: reported.code, reported: reported.message } : {}),
    });
    throw reported;
  } finally {
    await lock?.release();
  }
}

/**
 * A store that is down or refusing (an endpoint or route problem, a wrong table name, an IAM edit) fails new
 * ADDs with code 11, which the runtime retries, and a message naming the table; STATUS stays ready on a node
 * READY in this boot, so running pods keep running while it lasts.
 */
export function storeFailure(
  err: unknown,
  config: Pick<PluginConfig, 'tableName' | 'region' | 'dynamoEndpoint'>,
): unknown {
  const table = `lease table ${config.tableName} (${config.region ?? "the instance's region"}${
    config.dynamoEndpoint ? `, ${config.dynamoEndpoint}` : ''
  })`;
  if (err instanceof StoreUnavailableError)
    return new CniError(CniCode.tryAgainLater, `the ${table} is unreachable: ${err.message}`, err.name, { cause: err });
  if (err instanceof DynamoServiceError && !isTransient(err) && err.name !== 'ConditionalCheckFailedException')
    return new CniError(
      CniCode.tryAgainLater,
      `the ${table} refused the request: ${err.name}: ${err.message} (check the table name and the node role's policy)`,
      err.name,
      { cause: err },
    );
  return err;
}
