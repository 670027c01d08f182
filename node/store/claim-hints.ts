import { mkdirSync, readdirSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Lease, LeaseHolder } from '../../shared/domain/lease.js';
import { isConditionalCheckFailed } from '../../shared/dynamo/errors.js';
import type { IpFamily } from '../../shared/ipv6.js';
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
  take(nowMs: number, family?: IpFamily): { ip: string; version: number } | undefined {
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch {
      return undefined;
    }
    const eligible = names
      .map((name) => ({ name, parts: name.split('_') }))
      .filter(({ parts }) => parts.length === 3 && Number(parts[0]) <= nowMs && Number.isInteger(Number(parts[2])))
      .filter(({ parts }) => !family || (parts[1]!.includes(':') ? 'ipv6' : 'ipv4') === family);
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
export class HintedLeaseStore implements LeaseStore {
  constructor(
    private readonly inner: LeaseStore,
    private readonly table: ClaimItem,
    private readonly hints: ClaimHints,
  ) {}

  async claim(instanceArn: string, holder: LeaseHolder, nowMs: number, options: ClaimOptions = {}): Promise<Lease> {
    // A claim that must first look for the holder's own lease needs the Query anyway; so does one narrowed to an
    // ENI (a dual pod's second lease), which a hint cannot tell.
    if ((options.checkExisting ?? true) || options.eniId !== undefined)
      return this.inner.claim(instanceArn, holder, nowMs, options);
    for (let i = 0; i < HINT_TRIES; i++) {
      const hint = this.hints.take(nowMs, options.family);
      if (!hint) break;
      try {
        return await this.table.claimItem(instanceArn, hint.ip, hint.version, holder, nowMs);
      } catch (err) {
        if (isConditionalCheckFailed(err)) continue;
        // The write may have landed before the failure: the full claim finds the holder's lease if it did.
        return this.inner.claim(instanceArn, holder, nowMs, { ...options, checkExisting: true });
      }
    }
    return this.inner.claim(instanceArn, holder, nowMs, options);
  }

  async release(...args: Parameters<LeaseStore['release']>): Promise<Lease | undefined> {
    const lease = await this.inner.release(...args);
    if (lease) this.hints.add(lease);
    return lease;
  }

  putLeases(...args: Parameters<LeaseStore['putLeases']>) {
    return this.inner.putLeases(...args);
  }
  findByHolder(...args: Parameters<LeaseStore['findByHolder']>) {
    return this.inner.findByHolder(...args);
  }
  markReleasing(...args: Parameters<LeaseStore['markReleasing']>) {
    return this.inner.markReleasing(...args);
  }
  revertReleasing(...args: Parameters<LeaseStore['revertReleasing']>) {
    return this.inner.revertReleasing(...args);
  }
  deleteReleasing(...args: Parameters<LeaseStore['deleteReleasing']>) {
    return this.inner.deleteReleasing(...args);
  }
  deleteNodePartition(...args: Parameters<LeaseStore['deleteNodePartition']>) {
    return this.inner.deleteNodePartition(...args);
  }
  getLease(...args: Parameters<LeaseStore['getLease']>) {
    return this.inner.getLease(...args);
  }
  listLeases(...args: Parameters<LeaseStore['listLeases']>) {
    return this.inner.listLeases(...args);
  }
  countClaimable(...args: Parameters<LeaseStore['countClaimable']>) {
    return this.inner.countClaimable(...args);
  }
  getNode(...args: Parameters<LeaseStore['getNode']>) {
    return this.inner.getNode(...args);
  }
  createNode(...args: Parameters<LeaseStore['createNode']>) {
    return this.inner.createNode(...args);
  }
  updateNode(...args: Parameters<LeaseStore['updateNode']>) {
    return this.inner.updateNode(...args);
  }
  listNodes(...args: Parameters<LeaseStore['listNodes']>) {
    return this.inner.listNodes(...args);
  }
  listNodeRefs(...args: Parameters<LeaseStore['listNodeRefs']>) {
    return this.inner.listNodeRefs(...args);
  }
  acquirePassMarker(...args: Parameters<LeaseStore['acquirePassMarker']>) {
    return this.inner.acquirePassMarker(...args);
  }
  releasePassMarker(...args: Parameters<LeaseStore['releasePassMarker']>) {
    return this.inner.releasePassMarker(...args);
  }
}
