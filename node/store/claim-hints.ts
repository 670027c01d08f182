import { mkdirSync, readdirSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Lease, LeaseHolder } from '../../shared/domain/lease.js';
import { isConditionalCheckFailed } from '../../shared/dynamo/errors.js';
import type { ClaimOptions, LeaseStore } from '../../shared/lease-store/port.js';

/** The one request a hinted claim sends: the store's own conditional claim of a named lease at a known version. */
export interface ClaimItem {
  claimItem(instanceArn: string, ip: string, version: number, holder: LeaseHolder, nowMs: number): Promise<Lease>;
}

/** A node never needs more candidates than it runs pods; a bound keeps a wedged directory cheap to list. */
const MAX_HINTS = 256;
const HINT_TRIES = 2;

/**
 * Node-local hints of claimable leases, one empty file per lease named `<claimableAtMs>_<ip>_<version>`: every
 * DEL that releases a lease leaves one, and the next ADD claims a hinted lease with one conditional UpdateItem
 * and no Query. The write is the only authority — its condition (state, version, claimable time) rejects a
 * hint that went stale (claimed elsewhere, RELEASING, re-put) and the claim falls back to the Query path.
 * Taking a hint is unlinking its file, so two concurrent ADDs on the node never race for the same one.
 */
export class ClaimHints {
  constructor(
    private readonly dir: string,
    private readonly random: () => number = Math.random,
  ) {}

  /** Takes (removes) one hint claimable at `nowMs`, or undefined. */
  take(nowMs: number): { ip: string; version: number } | undefined {
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch {
      return undefined;
    }
    const eligible = names
      .map((name) => ({ name, parts: name.split('_') }))
      .filter(({ parts }) => parts.length === 3 && Number(parts[0]) <= nowMs && Number.isInteger(Number(parts[2])));
    while (eligible.length > 0) {
      const [pick] = eligible.splice(Math.floor(this.random() * eligible.length), 1);
      try {
        unlinkSync(join(this.dir, pick!.name));
        return { ip: pick!.parts[1]!, version: Number(pick!.parts[2]) };
      } catch {
        // another ADD took it first
      }
    }
    return undefined;
  }

  /** Records a lease this node just released (COOLDOWN or FREE, with its version). Best effort. */
  add(lease: Lease): void {
    if (lease.state !== 'COOLDOWN' && lease.state !== 'FREE') return;
    try {
      mkdirSync(this.dir, { recursive: true });
      if (readdirSync(this.dir).length >= MAX_HINTS) return;
      writeFileSync(join(this.dir, `${lease.reusableAtMs ?? 0}_${lease.ip}_${lease.version}`), '', { flag: 'wx' });
    } catch {
      // a hint is an optimisation: the Query path remains
    }
  }
}

/**
 * `inner` with hinted claims: `claim` without `checkExisting` first tries up to two hints, each one conditional
 * UpdateItem; `release` leaves a hint for the lease it released. Every other method is the inner store's.
 */
export function withClaimHints(inner: LeaseStore, table: ClaimItem, hints: ClaimHints): LeaseStore {
  const claim = async (
    instanceArn: string,
    holder: LeaseHolder,
    nowMs: number,
    options: ClaimOptions = {},
  ): Promise<Lease> => {
    // A claim that must first look for the holder's own lease needs the Query anyway.
    if (options.checkExisting ?? true) return inner.claim(instanceArn, holder, nowMs, options);
    for (let i = 0; i < HINT_TRIES; i++) {
      const hint = hints.take(nowMs);
      if (!hint) break;
      try {
        return await table.claimItem(instanceArn, hint.ip, hint.version, holder, nowMs);
      } catch (err) {
        if (isConditionalCheckFailed(err)) continue;
        // The write may have landed before the failure: the full claim finds the holder's lease if it did.
        return inner.claim(instanceArn, holder, nowMs, { ...options, checkExisting: true });
      }
    }
    return inner.claim(instanceArn, holder, nowMs, options);
  };
  const release: LeaseStore['release'] = async (...args) => {
    const lease = await inner.release(...args);
    if (lease) hints.add(lease);
    return lease;
  };
  return new Proxy(inner, {
    get(target, key) {
      if (key === 'claim') return claim;
      if (key === 'release') return release;
      const value = Reflect.get(target, key, target) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
