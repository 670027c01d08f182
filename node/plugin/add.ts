import type { Lease } from '../../shared/domain/lease.js';
import { sameHolder } from '../../shared/domain/lease.js';
import { DynamoServiceError, isTransient } from '../../shared/dynamo/errors.js';
import { StoreUnavailableError } from '../../shared/errors.js';
import { ipFamilyOf } from '../../shared/ipv6.js';
import { claimPodLeases, findPodLeases } from '../../shared/lease-store/claim-pair.js';
import type { HolderRef, LeaseStore } from '../../shared/lease-store/port.js';
import { CniCode, CniError } from '../cni/errors.js';
import type { CniResult } from '../cni/result.js';
import { appendResult, formatResult, parsePrevResult } from '../cni/result.js';
import type { CniOutput } from '../cni/skel.js';
import type { PluginConfig } from '../config/netconf.js';
import { checkNetns } from '../datapath/netns.js';
import { type PodLink, type PodLinkSpec, podAddresses, subnetPrefixLength } from '../datapath/port.js';
import { teardownPodRouting } from '../datapath/routing-teardown.js';
import { faultPoint } from '../datapath/test-hooks.js';
import { UndoStack } from '../datapath/undo.js';
import { verifyAttachment } from '../datapath/verify.js';
import { type AttachmentLock, lockAttachment } from '../journal/lock.js';
import { classify } from './classify.js';
import type { CallContext } from './context.js';
import { explainFamilyMismatch } from './family-check.js';
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

    const family = config.ipFamily;
    const wanted = family === 'dual' ? 2 : 1;
    let leases: Lease[] = [];
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
      const recorded = [record?.ip, record?.ipv6?.ip].filter((ip): ip is string => ip !== undefined);
      if (recorded.length === wanted) {
        const held = await Promise.all(recorded.map((ip) => store.getLease(arn, ip)));
        if (held.every((l) => l?.state === 'CLAIMED' && l.holder && sameHolder(l.holder, holder)))
          leases = held as Lease[];
      }
      if (leases.length < wanted) leases = await findPodLeases(store, arn, req.containerId, req.ifName, family);
      // A dual ADD that crashed between its two claims holds one lease: the claim below finds it and adds the other.
      reused = leases.length === wanted;
      log.info('repeated ADD', { recorded, found: leases.map((l) => l.ip) });
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
    if (!reused) {
      try {
        leases = [
          ...(await claimPodLeases(store, arn, holder, nowMs, family, { checkExisting: leases.length > 0 }, () =>
            faultPoint(ctx.hooks, 'between-claims'),
          )),
        ];
      } catch (err) {
        // A claim that failed on the wire may still have landed (the write done, every answer lost): give back
        // whatever this attachment holds, or the runtime's retry of this ADD finds its own address taken.
        if (err instanceof StoreUnavailableError)
          await releaseHeld(store, arn, holder, ctx.nowMs(), config.reuseWaitMs, wanted).catch(() => {
            keepIntent = true;
          });
        throw await explainFamilyMismatch(err, store, arn, family);
      }
    }
    marks['claim'] = performance.now();
    const [claimed, claimedV6] = leases as [Lease, Lease | undefined];
    const ipv6Lease = family === 'dual' ? claimedV6 : undefined;
    undo.push('claim', async () => {
      for (const lease of leases) await store.release(arn, holder, ctx.nowMs(), config.reuseWaitMs, lease.ip);
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
      ...(ipv6Lease
        ? { ipv6: { ip: ipv6Lease.ip, subnetCidr: ipv6Lease.subnetCidr, gateway: ipv6Lease.gateway } }
        : {}),
    });
    recorded.catch(() => undefined); // awaited below or by the undo
    undo.push('journal-record', () => recorded.catch(() => undefined));
    faultPoint(ctx.hooks, 'journal-record');

    const prefixLength = subnetPrefixLength(claimed.subnetCidr);
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
      ...(ipv6Lease
        ? {
            ipv6: {
              ip: ipv6Lease.ip,
              prefixLength: subnetPrefixLength(ipv6Lease.subnetCidr),
              gateway: ipv6Lease.gateway,
            },
          }
        : {}),
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
        const teardown = routingTeardown(config, req, placementOf(claimed, ipv6Lease));
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
      const routing = routingTeardown(config, req, placementOf(claimed, ipv6Lease));
      if (routing) await teardownPodRouting(req.netns, routing);
    });

    const ours: CniResult = {
      interfaces: [{ name: link.ifName, mac: link.mac, mtu: link.mtu, sandbox: link.sandbox }],
      ips: podAddresses(spec).map((a) => ({ address: `${a.ip}/${a.prefixLength}`, gateway: a.gateway, interface: 0 })),
      routes: podAddresses(spec).map((a) => ({
        dst: ipFamilyOf(a.ip) === 'ipv6' ? '::/0' : '0.0.0.0/0',
        gw: a.gateway,
      })),
      dns: {},
    };
    await recorded;
    marks['datapath'] = performance.now();
    faultPoint(ctx.hooks, 'print-result');
    undo.commit();
    // Milliseconds since the process started, per phase: where a slow ADD spent its time.
    const sinceStartMs = Object.fromEntries(Object.entries(marks).map(([k, v]) => [k, Math.round(v)]));
    log.info('added', {
      ip: claimed.ip,
      ...(ipv6Lease ? { ipv6: ipv6Lease.ip } : {}),
      eniId: claimed.eniId,
      reused,
      identity: identity.source,
      sinceStartMs,
    });
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

/** What the routing teardown needs of the claimed leases: a dual pod's IPv6 address has rules of its own. */
function placementOf(claimed: Lease, ipv6Lease: Lease | undefined): { ip: string; deviceIndex: number; ipv6?: string } {
  return { ip: claimed.ip, deviceIndex: claimed.deviceIndex, ...(ipv6Lease ? { ipv6: ipv6Lease.ip } : {}) };
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

/** Releases what a holder holds without knowing the addresses: one lookup and one write per lease. */
async function releaseHeld(
  store: LeaseStore,
  arn: string,
  holder: HolderRef,
  nowMs: number,
  reuseWaitMs: number,
  most: number,
): Promise<void> {
  for (let i = 0; i < most; i++) if (!(await store.release(arn, holder, nowMs, reuseWaitMs))) return;
}
