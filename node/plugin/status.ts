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
  /** Timeouts, 5xx, throttling, refused connections: maybe a blip, judged against the grace period. */
  | { readonly kind: 'unreachable'; readonly error: string }
  /** The store answered with a refusal (credentials, permissions, no such table): waiting will not help. */
  | { readonly kind: 'refused'; readonly error: string };

export interface StatusFacts {
  readonly nowMs: number;
  readonly identityError?: string;
  readonly credentialsExpireAtMs?: number;
  /** Absent when there was no identity to sign a request with. */
  readonly store?: StoreProbe;
  /** When the store last answered a STATUS on this node (the node-local state file). */
  readonly storeOkAtMs?: number;
  readonly graceMs: number;
}

/**
 * Why this node cannot serve an ADD at all, or undefined when it can. Only node-wide causes count: a full pool or
 * addresses in cooldown are not "unavailable", since the runtime turns a STATUS error into NetworkReady=false, a
 * NotReady node and, after the default 300 s toleration, the eviction of every pod on it.
 */
export function unavailableReason(f: StatusFacts): string | undefined {
  if (f.identityError !== undefined) return `no instance identity: ${f.identityError}`;
  if (f.credentialsExpireAtMs !== undefined && f.credentialsExpireAtMs <= f.nowMs)
    return `the instance credentials expired at ${new Date(f.credentialsExpireAtMs).toISOString()}`;
  const store = f.store;
  if (!store) return 'the lease store was not asked';
  if (store.kind === 'refused') return `the lease store refused the node: ${store.error}`;
  if (store.kind === 'unreachable') {
    const sinceMs = f.storeOkAtMs === undefined ? undefined : f.nowMs - f.storeOkAtMs;
    if (sinceMs !== undefined && sinceMs >= 0 && sinceMs <= f.graceMs) return undefined;
    const last =
      sinceMs === undefined
        ? 'never reached'
        : sinceMs < 0
          ? 'unreachable (its last answer is dated in the future)'
          : `unreachable for ${Math.round(sinceMs / 1000)} s`;
    return `the lease store is ${last} (grace ${Math.round(f.graceMs / 1000)} s): ${store.error}`;
  }
  const node = store.node;
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

interface StatusState {
  readonly storeOkAtMs: number;
}

function readState(path: string): StatusState | undefined {
  try {
    const state = JSON.parse(readFileSync(path, 'utf8')) as Partial<StatusState>;
    return typeof state.storeOkAtMs === 'number' ? { storeOkAtMs: state.storeOkAtMs } : undefined;
  } catch {
    return undefined;
  }
}

function writeState(path: string, dir: string, state: StatusState): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(state), { mode: 0o600 });
  renameSync(tmp, path);
}

async function probeStore(ctx: CallContext, instanceArn: string): Promise<StoreProbe> {
  try {
    return { kind: 'answered', node: await (await ctx.store()).getNode(instanceArn) };
  } catch (err) {
    return err instanceof StoreUnavailableError
      ? { kind: 'unreachable', error: errorMessage(err) }
      : { kind: 'refused', error: errorMessage(err) };
  }
}

/**
 * STATUS (CNI 1.1): "can this node serve ADDs at all" — identity, credentials, the store (one GetItem of the
 * node item) and the node's phase. The last answer of the store is remembered in `<dataDir>/status.json`, so one
 * failed request within `statusStoreGraceMs` of a success leaves the node ready.
 */
export async function cmdStatus(ctx: CallContext): Promise<CniOutput> {
  const { config, log } = ctx;
  const nowMs = ctx.nowMs();
  const statePath = join(config.dataDir, 'status.json');
  let facts: StatusFacts = { nowMs, graceMs: config.statusStoreGraceMs };
  try {
    const identity = await ctx.identity();
    const store = await probeStore(ctx, identity.instanceArn);
    const storeOkAtMs = readState(statePath)?.storeOkAtMs;
    facts = {
      ...facts,
      store,
      ...(identity.credentials.expirationMs !== undefined
        ? { credentialsExpireAtMs: identity.credentials.expirationMs }
        : {}),
      ...(storeOkAtMs !== undefined ? { storeOkAtMs } : {}),
    };
    if (store.kind === 'answered') {
      try {
        writeState(statePath, config.dataDir, { storeOkAtMs: nowMs });
      } catch (err) {
        log.warn('STATUS: cannot record the store answer', { err });
      }
    }
  } catch (err) {
    facts = { ...facts, identityError: errorMessage(err) };
  }
  const reason = unavailableReason(facts);
  if (reason !== undefined) {
    log.warn('STATUS: not available', { reason });
    throw new CniError(CniCode.pluginNotAvailable, 'vpc-lease cannot serve ADD on this node', reason);
  }
  if (facts.store?.kind === 'unreachable')
    log.warn('STATUS: store unreachable, still within the grace period', { error: facts.store.error });
  return undefined;
}
