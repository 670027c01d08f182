import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { NodeRecord } from '../../shared/domain/node.js';
import { errorMessage, StoreUnavailableError } from '../../shared/errors.js';
import { CniCode, CniError } from '../cni/errors.js';
import type { CniOutput } from '../cni/skel.js';
import type { CallContext } from './context.js';

/** What one read of the node item said about the store. */
export type StoreProbe =
  | { readonly kind: 'answered'; readonly node: NodeRecord | undefined }
  /** Timeouts, 5xx, throttling, refused connections. */
  | { readonly kind: 'unreachable'; readonly error: string }
  /** The store answered with a refusal (permissions, no such table, bad key). */
  | { readonly kind: 'refused'; readonly error: string };

export interface StatusFacts {
  readonly nowMs: number;
  readonly identityError?: string;
  readonly credentialsExpireAtMs?: number;
  /** Absent when there was no identity to sign a request with. */
  readonly store?: StoreProbe;
  /** This node was seen READY since the current boot (the node-local record of `readyBootFile`). */
  readonly readyThisBoot: boolean;
}

export interface StatusVerdict {
  /** Why STATUS fails with 50: a cause local to this node. */
  readonly unavailable?: string;
  /** A shared dependency's failure STATUS does not fail for: ADDs get code 11 until it passes. */
  readonly degraded?: string;
}

/**
 * Why the node item's phase means the node cannot serve ADDs, or undefined when it is READY. The installer asks
 * the same question before it writes the conflist.
 */
export function phaseProblem(node: NodeRecord | undefined): string | undefined {
  // Hook-less launches (Karpenter, plain RunInstances) start kubelet before the control plane has leased anything.
  if (!node) return 'the node is not provisioned yet: no node item in the lease table';
  switch (node.phase) {
    case 'READY':
      return undefined;
    case 'PENDING':
    case 'PROVISIONING':
      return `the node is not provisioned yet (phase ${node.phase})`;
    case 'FAILED':
      return `the node failed provisioning: ${node.failureReason ?? 'no reason recorded'}`;
    default:
      return `the node is ${node.phase}`;
  }
}

/** What a store that did not answer means, in words (STATUS and the installer say it the same way). */
export function storeProblem(probe: Exclude<StoreProbe, { kind: 'answered' }>): string {
  return `the lease store ${probe.kind === 'refused' ? 'refused the request' : 'is unreachable'}: ${probe.error}`;
}

/**
 * STATUS's rule (DESIGN.md): 50 only for causes local to this node — no identity or credentials, not provisioned
 * since this boot, DRAINING, GONE or FAILED. The runtime turns a STATUS error into NetworkReady=false, a NotReady
 * node and, 300 s later, the eviction of every pod on it; a store that is down or refusing (an AZ's endpoint, a
 * wrong table name, an IAM edit) would do that to every node at once while their pods need no store. So once a
 * node has been seen READY in this boot, the store's silence or refusal, however long, leaves it ready, and so
 * does an answer without a READY item (another table of that name); only an explicit DRAINING, GONE or FAILED
 * overrides the earlier READY. A full pool or addresses in cooldown never count.
 */
export function judgeStatus(f: StatusFacts): StatusVerdict {
  if (f.identityError !== undefined) return { unavailable: `no instance identity: ${f.identityError}` };
  if (f.credentialsExpireAtMs !== undefined && f.credentialsExpireAtMs <= f.nowMs)
    return { unavailable: `the instance credentials expired at ${new Date(f.credentialsExpireAtMs).toISOString()}` };
  const store = f.store;
  if (!store) return { unavailable: 'the lease store was not asked' };
  const neverReady = 'the node has not been seen READY since this boot';
  if (store.kind !== 'answered') {
    const problem = storeProblem(store);
    return f.readyThisBoot ? { degraded: problem } : { unavailable: `${neverReady}, and ${problem}` };
  }
  const problem = phaseProblem(store.node);
  if (problem === undefined) return {};
  const phase = store.node?.phase;
  if (phase === 'DRAINING' || phase === 'GONE' || phase === 'FAILED' || !f.readyThisBoot)
    return { unavailable: problem };
  return { degraded: `${problem}, though it was READY earlier in this boot` };
}

/** The kernel's id of the current boot: a READY seen before a reboot says nothing about this one. */
export const BOOT_ID_FILE = '/proc/sys/kernel/random/boot_id';

export function readBootId(path = BOOT_ID_FILE): string {
  return readFileSync(path, 'utf8').trim();
}

/** `<dataDir>/ready-boot`: the boot id in which STATUS last saw the node READY. */
export function readyBootFile(dataDir: string): string {
  return join(dataDir, 'ready-boot');
}

function readyBootId(path: string): string | undefined {
  try {
    return (JSON.parse(readFileSync(path, 'utf8')) as { bootId?: unknown }).bootId as string | undefined;
  } catch {
    return undefined;
  }
}

function recordReadyBoot(dataDir: string, bootId: string, nowMs: number): void {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const path = readyBootFile(dataDir);
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify({ bootId, readyAtMs: nowMs }), { mode: 0o600 });
  renameSync(tmp, path);
}

export async function probeStore(getNode: () => Promise<NodeRecord | undefined>): Promise<StoreProbe> {
  try {
    return { kind: 'answered', node: await getNode() };
  } catch (err) {
    return err instanceof StoreUnavailableError
      ? { kind: 'unreachable', error: errorMessage(err) }
      : { kind: 'refused', error: err instanceof Error ? `${err.name}: ${err.message}` : errorMessage(err) };
  }
}

/**
 * STATUS (CNI 1.1): "can this node serve ADDs at all" — identity, credentials, one GetItem of the node item, and
 * whether this boot has seen the node READY (`<dataDir>/ready-boot`, keyed by the kernel's boot id).
 */
export async function cmdStatus(ctx: CallContext): Promise<CniOutput> {
  const { config, log } = ctx;
  const nowMs = ctx.nowMs();
  const bootId = ctx.bootId();
  const recordPath = readyBootFile(config.dataDir);
  const readyThisBoot = readyBootId(recordPath) === bootId;
  let facts: StatusFacts = { nowMs, readyThisBoot };
  try {
    const identity = await ctx.identity();
    const store = await probeStore(async () => (await ctx.store()).getNode(identity.instanceArn));
    facts = {
      ...facts,
      store,
      ...(identity.credentials.expirationMs !== undefined
        ? { credentialsExpireAtMs: identity.credentials.expirationMs }
        : {}),
    };
  } catch (err) {
    facts = { ...facts, identityError: errorMessage(err) };
  }
  const verdict = judgeStatus(facts);
  if (!readyThisBoot && facts.store?.kind === 'answered' && facts.store.node?.phase === 'READY') {
    try {
      recordReadyBoot(config.dataDir, bootId, nowMs);
    } catch (err) {
      log.warn('STATUS: cannot record that the node is READY in this boot', { err, path: recordPath });
    }
  }
  if (verdict.unavailable !== undefined) {
    log.warn('STATUS: not available', { reason: verdict.unavailable });
    throw new CniError(CniCode.pluginNotAvailable, 'vpc-lease cannot serve ADD on this node', verdict.unavailable);
  }
  if (verdict.degraded !== undefined)
    log.warn('STATUS: ready for running pods; new ADDs fail with code 11 until this passes', {
      reason: verdict.degraded,
    });
  return undefined;
}
