import { type Lease, type LeaseHolder, sameHolder } from '../../shared/domain/lease.js';
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
import { type Datapath, type PodLink, type PodLinkSpec, podAddresses } from '../datapath/port.js';
import { teardownPodRouting } from '../datapath/routing-teardown.js';
import { faultPoint } from '../datapath/test-hooks.js';
import { UndoStack } from '../datapath/undo.js';
import { verifyAttachment } from '../datapath/verify.js';
import type { NodeIdentity } from '../identity/identity.js';
import { type AttachmentLock, lockAttachment } from '../journal/lock.js';
import { classify } from './classify.js';
import type { CallContext } from './context.js';
import { explainFamilyMismatch } from './family-check.js';
import { podLinkSpec } from './link-spec.js';
import { routingTeardown } from './routing.js';

/**
 * ADD, in the order the protocol reads: parse → the attachment's lock → journal intent → claim (Query + UpdateItem,
 * nothing else on the store) → journal the address → wire the link in the pod → print the result. Every step
 * pushes its undo on one list; a failure anywhere releases the claim, removes the link and the record, and reports
 * the original error.
 */
export async function cmdAdd(ctx: CallContext): Promise<CniOutput> {
  const { request: req, config, log } = ctx;
  const prev = req.netconf['prevResult'] !== undefined ? parsePrevResult(req.netconf['prevResult']) : undefined;
  const undo = new UndoStack(log);
  let lock: AttachmentLock | undefined;
  try {
    // Before anything changes: a bad netns path is the caller's mistake and must leave no trace.
    checkNetns(req.netns);
    const marks: Record<string, number> = { start: performance.now() };
    // Two ADDs of one attachment never run side by side, however long the first hangs (the runtime's retry).
    lock = await lockAttachment(config.dataDir, req.containerId, req.ifName, config.attachmentLockWaitMs);
    const call = await openCall(ctx);
    marks['identity'] = performance.now();
    const intent = await openIntent(ctx, call, undo);
    // Load netlink (CPU-bound) while the claim's requests are on the wire; setImmediate lets them leave first.
    const datapathReady = new Promise<void>((resolve) => setImmediate(resolve)).then(() => ctx.datapath());
    datapathReady.catch(() => undefined); // awaited below; a failure is reported there, not as unhandled
    const pod = await claim(ctx, call, intent, undo);
    marks['claim'] = performance.now();
    const recorded = recordAddress(ctx, call, pod, undo);
    const datapath = await datapathReady;
    marks['netlink'] = performance.now();
    const spec = podLinkSpec(ctx, pod.v4, pod.v6);
    const link = await wire(ctx, datapath, spec, pod, intent.reused, undo);
    const ours = cniResult(link, spec);
    await recorded;
    marks['datapath'] = performance.now();
    faultPoint(ctx.hooks, 'print-result');
    undo.commit();
    // Milliseconds since the process started, per phase: where a slow ADD spent its time.
    const sinceStartMs = Object.fromEntries(Object.entries(marks).map(([k, v]) => [k, Math.round(v)]));
    log.info('added', {
      ip: pod.v4.ip,
      ...(pod.v6 ? { ipv6: pod.v6.ip } : {}),
      eniId: pod.v4.eniId,
      reused: intent.reused,
      identity: call.identity.source,
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

/** What every step of one ADD works with: the node, its store, the attachment's holder, the call's time. */
interface AddCall {
  readonly identity: NodeIdentity;
  readonly store: LeaseStore;
  readonly arn: string;
  readonly holder: LeaseHolder;
  readonly nowMs: number;
  /** Leases the pod holds: two for a dual-stack pod. */
  readonly wanted: number;
}

async function openCall(ctx: CallContext): Promise<AddCall> {
  const identity = await ctx.identity();
  const store = await ctx.store();
  return {
    identity,
    store,
    arn: identity.instanceArn,
    holder: ctx.holder,
    nowMs: ctx.nowMs(),
    wanted: ctx.config.ipFamily === 'dual' ? 2 : 1,
  };
}

/** The attachment's journal intent, and what a repeated ADD already holds. */
interface Intent {
  /** Leases the attachment held before this ADD (a repeated one). */
  readonly leases: Lease[];
  /** All of them: this ADD claims nothing and checks the link it finds instead. */
  readonly reused: boolean;
  /**
   * Set when a claim's outcome stays unknown: the intent then tells the next ADD or DEL of this attachment to
   * look the holder up, so a claim that landed is found (reused or released), never left beside a second one.
   */
  keep: boolean;
}

/** Writes the intent, or for a repeated ADD (its predecessor finished or died: we hold the lock) finds its leases. */
async function openIntent(ctx: CallContext, call: AddCall, undo: UndoStack): Promise<Intent> {
  const { request: req, journal } = ctx;
  const fresh = journal.createIntent({
    containerId: req.containerId,
    ifName: req.ifName,
    netns: req.netns,
    createdAtMs: call.nowMs,
    pid: process.pid,
  });
  const leases = fresh ? [] : await heldBefore(ctx, call);
  // A dual ADD that crashed between its two claims holds one lease: the claim finds it and adds the other.
  const intent: Intent = { leases, reused: leases.length === call.wanted, keep: false };
  // From here the record is ours (fresh, or a finished or crashed ADD of the same attachment).
  undo.push('journal-intent', () => {
    if (!intent.keep) journal.remove(req.containerId, req.ifName);
  });
  faultPoint(ctx.hooks, 'journal-intent');
  return intent;
}

/**
 * A complete record costs one GetItem per address to confirm; an intent alone means a crash between the claim
 * and its record, so ask the store.
 */
async function heldBefore(ctx: CallContext, call: AddCall): Promise<Lease[]> {
  const { request: req, journal, log } = ctx;
  const record = journal.read(req.containerId, req.ifName);
  const recorded = [record?.ip, record?.ipv6?.ip].filter((ip): ip is string => ip !== undefined);
  let leases: Lease[] = [];
  if (recorded.length === call.wanted) {
    const held = await Promise.all(recorded.map((ip) => call.store.getLease(call.arn, ip)));
    if (held.every((l) => l?.state === 'CLAIMED' && l.holder && sameHolder(l.holder, call.holder)))
      leases = held as Lease[];
  }
  if (leases.length < call.wanted)
    leases = await findPodLeases(call.store, call.arn, req.containerId, req.ifName, ctx.config.ipFamily);
  log.info('repeated ADD', { recorded, found: leases.map((l) => l.ip) });
  return leases;
}

/** The pod's leases: its IPv4 or IPv6 one, and a dual pod's IPv6 one beside it. */
interface PodLeases {
  readonly v4: Lease;
  readonly v6: Lease | undefined;
}

async function claim(ctx: CallContext, call: AddCall, intent: Intent, undo: UndoStack): Promise<PodLeases> {
  const { config } = ctx;
  const { store, arn, holder } = call;
  let leases = intent.leases;
  if (!intent.reused) {
    try {
      leases = [
        ...(await claimPodLeases(
          store,
          arn,
          holder,
          call.nowMs,
          config.ipFamily,
          { checkExisting: leases.length > 0 },
          () => faultPoint(ctx.hooks, 'between-claims'),
        )),
      ];
    } catch (err) {
      // A claim that failed on the wire may still have landed (the write done, every answer lost): give back
      // whatever this attachment holds, or the runtime's retry of this ADD finds its own address taken.
      if (err instanceof StoreUnavailableError)
        await releaseHeld(store, arn, holder, ctx.nowMs(), config.reuseWaitMs, call.wanted).catch(() => {
          intent.keep = true;
        });
      throw await explainFamilyMismatch(err, store, arn, config.ipFamily);
    }
  }
  const [v4, v6] = leases as [Lease, Lease | undefined];
  undo.push('claim', async () => {
    for (const lease of leases) await store.release(arn, holder, ctx.nowMs(), config.reuseWaitMs, lease.ip);
  });
  faultPoint(ctx.hooks, 'claim');
  return { v4, v6: config.ipFamily === 'dual' ? v6 : undefined };
}

/** Starts syncing the address to the journal while the datapath is built; awaited before the result. */
function recordAddress(ctx: CallContext, call: AddCall, pod: PodLeases, undo: UndoStack): Promise<void> {
  const { request: req, journal } = ctx;
  const { v4, v6 } = pod;
  const recorded = journal.write({
    containerId: req.containerId,
    ifName: req.ifName,
    netns: req.netns,
    createdAtMs: call.nowMs,
    ip: v4.ip,
    placement: {
      eniId: v4.eniId,
      deviceIndex: v4.deviceIndex,
      mac: v4.mac,
      subnetId: v4.subnetId,
      subnetCidr: v4.subnetCidr,
      gateway: v4.gateway,
    },
    ...(v6 ? { ipv6: { ip: v6.ip, subnetCidr: v6.subnetCidr, gateway: v6.gateway } } : {}),
  });
  recorded.catch(() => undefined); // awaited by the caller or by the undo
  // The undo waits for the write before it removes the record.
  undo.push('journal-record', () => recorded.catch(() => undefined));
  faultPoint(ctx.hooks, 'journal-record');
  return recorded;
}

/**
 * Builds the pod's link, or keeps the one a repeated ADD finds intact. The runtime repeats an ADD when it doubts
 * the first: the attachment is kept only if all of it is (link, rule, table route, host veth), else what is left
 * is removed and built again.
 */
async function wire(
  ctx: CallContext,
  datapath: Datapath,
  spec: PodLinkSpec,
  pod: PodLeases,
  reused: boolean,
  undo: UndoStack,
): Promise<PodLink> {
  const { request: req, config, log } = ctx;
  const teardown = async (): Promise<void> => {
    await datapath.teardown(req.netns, req.ifName);
    const routing = routingTeardown(config, req, placementOf(pod.v4, pod.v6));
    if (routing) await teardownPodRouting(req.netns, routing);
  };
  let link: PodLink | undefined;
  if (reused) {
    const found = await verifyAttachment(datapath, spec, ctx.hooks.linkKind);
    if (found.problems.length === 0 && found.link)
      link = { ifName: req.ifName, mac: found.link.mac, mtu: found.link.mtu, sandbox: req.netns };
    else {
      log.warn('repeated ADD: rebuilding the attachment', { problems: found.problems });
      await teardown();
    }
  }
  link ??= await datapath.setup({ ...spec, peers: peersOnMaster(ctx, pod.v4.mac) });
  // Also for a link a previous ADD built: the claim is released on failure, so its address must go too.
  undo.push('datapath', teardown);
  return link;
}

/** The other pods on this ENI's interface: setup refuses to re-mode an ipvlan master they already share. */
function peersOnMaster(ctx: CallContext, mac: string): { netnsPath: string; ifName: string }[] {
  const { request: req, journal } = ctx;
  return journal
    .list()
    .filter((r) => r.placement?.mac === mac && !(r.containerId === req.containerId && r.ifName === req.ifName))
    .map((r) => ({ netnsPath: r.netns, ifName: r.ifName }));
}

function cniResult(link: PodLink, spec: PodLinkSpec): CniResult {
  const addresses = podAddresses(spec);
  return {
    interfaces: [{ name: link.ifName, mac: link.mac, mtu: link.mtu, sandbox: link.sandbox }],
    ips: addresses.map((a) => ({ address: `${a.ip}/${a.prefixLength}`, gateway: a.gateway, interface: 0 })),
    routes: addresses.map((a) => ({ dst: ipFamilyOf(a.ip) === 'ipv6' ? '::/0' : '0.0.0.0/0', gw: a.gateway })),
    dns: {},
  };
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
