import fc from 'fast-check';
import { isClaimable, type Lease } from '../../shared/domain/lease.js';
import { LeaseConflictError, LeaseNotFoundError, NoFreeLeaseError } from '../../shared/errors.js';
import type { LeaseStore } from '../../shared/lease-store/port.js';

/**
 * A model of one node's leases (DESIGN.md's state machine, port.ts's contract) and fast-check commands that
 * drive a real LeaseStore and the model side by side. Every command states what the store must answer, and
 * after every command the whole partition must equal the model — the same commands run on MemoryLeaseStore
 * and on DynamoLeaseStore against dynalite, so the fake is shown faithful where it matters.
 */
export interface ModelLease {
  state: Lease['state'];
  holder?: string;
  reusableAtMs?: number;
  releasedAtMs?: number;
}

export interface LeaseModel {
  readonly leases: Map<string, ModelLease>;
  nowMs: number;
}

export interface RealNode {
  readonly store: LeaseStore;
  readonly arn: string;
}

export const BASE_MS = 1_700_000_000_000;
export const HOLDERS = ['c0', 'c1', 'c2', 'c3', 'c4'] as const;
export const IPS = ['10.9.0.10', '10.9.0.11', '10.9.0.12', '10.9.0.13', '10.9.0.14', '10.9.0.15'] as const;

export function newLease(arn: string, ip: string): Parameters<LeaseStore['putLeases']>[0][number] {
  return {
    instanceArn: arn,
    ip,
    eniId: 'eni-0aaaaaaaaaaaaaaa1',
    deviceIndex: 1,
    mac: '02:00:00:00:00:09',
    subnetId: 'subnet-0aaaaaaaaaaaaaaa1',
    subnetCidr: '10.9.0.0/24',
    gateway: '10.9.0.1',
  };
}

const holderOf = (id: string) => ({ containerId: id, ifName: 'eth0', netns: `/var/run/netns/${id}` });

function heldBy(model: LeaseModel, holder: string): string | undefined {
  for (const [ip, l] of model.leases) if (l.state === 'CLAIMED' && l.holder === holder) return ip;
  return undefined;
}

function claimable(model: LeaseModel): string[] {
  return [...model.leases]
    .filter(([, l]) =>
      isClaimable(
        { state: l.state, ...(l.reusableAtMs !== undefined ? { reusableAtMs: l.reusableAtMs } : {}) },
        model.nowMs,
      ),
    )
    .map(([ip]) => ip);
}

async function expectError(
  what: string,
  run: () => Promise<unknown>,
  type: new (...a: never[]) => Error,
): Promise<void> {
  try {
    await run();
  } catch (err) {
    if (err instanceof type) return;
    throw new Error(`${what}: expected ${type.name}, got ${(err as Error).name}: ${(err as Error).message}`);
  }
  throw new Error(`${what}: expected ${type.name}, but it succeeded`);
}

function fail(message: string): never {
  throw new Error(message);
}

/** The partition must be exactly the model: same addresses, states, holders and reuse times. */
export async function assertSameAsModel(model: LeaseModel, real: RealNode): Promise<void> {
  const leases = await real.store.listLeases(real.arn);
  const actual = Object.fromEntries(
    leases.map((l) => [
      l.ip,
      {
        state: l.state,
        holder: l.holder?.containerId,
        reusableAtMs: l.state === 'FREE' || l.state === 'COOLDOWN' ? l.reusableAtMs : undefined,
      },
    ]),
  );
  const expected = Object.fromEntries(
    [...model.leases].map(([ip, l]) => [
      ip,
      {
        state: l.state,
        holder: l.holder,
        reusableAtMs: l.state === 'FREE' || l.state === 'COOLDOWN' ? l.reusableAtMs : undefined,
      },
    ]),
  );
  if (JSON.stringify(actual, Object.keys(actual).sort()) !== JSON.stringify(expected, Object.keys(expected).sort()))
    fail(`store differs from model:\n store ${JSON.stringify(actual)}\n model ${JSON.stringify(expected)}`);
  // Invariant 1: one lease per holder at most.
  const holders = leases.filter((l) => l.state === 'CLAIMED').map((l) => l.holder?.containerId);
  if (new Set(holders).size !== holders.length) fail(`a holder holds two leases: ${holders.join(', ')}`);
}

type Cmd = fc.AsyncCommand<LeaseModel, RealNode>;

class PutLeases implements Cmd {
  constructor(readonly ips: readonly string[]) {}
  check = (): boolean => true;
  async run(m: LeaseModel, r: RealNode): Promise<void> {
    await r.store.putLeases(
      this.ips.map((ip) => newLease(r.arn, ip)),
      BASE_MS + m.nowMs,
    );
    for (const ip of this.ips)
      if (!m.leases.has(ip)) m.leases.set(ip, { state: 'FREE', reusableAtMs: BASE_MS + m.nowMs });
    await assertSameAsModel(m, r);
  }
  toString = (): string => `put(${this.ips.join(',')})`;
}

class Claim implements Cmd {
  constructor(readonly holder: string) {}
  check = (): boolean => true;
  async run(m: LeaseModel, r: RealNode): Promise<void> {
    const now = BASE_MS + m.nowMs;
    const existing = heldBy(m, this.holder);
    const open = claimable({ ...m, nowMs: now });
    if (!existing && open.length === 0) {
      await expectError(
        `claim by ${this.holder}`,
        () => r.store.claim(r.arn, holderOf(this.holder), now),
        NoFreeLeaseError,
      );
      return;
    }
    const lease = await r.store.claim(r.arn, holderOf(this.holder), now);
    if (existing && lease.ip !== existing) fail(`repeated claim by ${this.holder} moved ${existing} → ${lease.ip}`);
    if (!existing && !open.includes(lease.ip)) fail(`claimed ${lease.ip}, which was not claimable (${open.join(',')})`);
    if (lease.state !== 'CLAIMED' || lease.holder?.containerId !== this.holder) fail(`claim returned ${lease.state}`);
    m.leases.set(lease.ip, { state: 'CLAIMED', holder: this.holder });
    await assertSameAsModel(m, r);
  }
  toString = (): string => `claim(${this.holder})`;
}

class Release implements Cmd {
  constructor(
    readonly holder: string,
    readonly byIp: 'none' | 'own' | 'other',
    readonly reuseWaitMs: number,
  ) {}
  check = (): boolean => true;
  async run(m: LeaseModel, r: RealNode): Promise<void> {
    const now = BASE_MS + m.nowMs;
    const held = heldBy(m, this.holder);
    const other = IPS.find((ip) => ip !== held) ?? IPS[0];
    const ip = this.byIp === 'none' ? undefined : this.byIp === 'own' ? (held ?? IPS[0]) : other;
    const released = await r.store.release(r.arn, holderOf(this.holder), now, this.reuseWaitMs, ip);
    const expected = held !== undefined && (ip === undefined || ip === held) ? held : undefined;
    if (released?.ip !== expected)
      fail(`release by ${this.holder} (ip ${ip}) gave ${released?.ip}, expected ${expected}`);
    if (expected)
      m.leases.set(expected, { state: 'COOLDOWN', reusableAtMs: now + this.reuseWaitMs, releasedAtMs: now });
    await assertSameAsModel(m, r);
  }
  toString = (): string => `release(${this.holder}, ${this.byIp}, ${this.reuseWaitMs})`;
}

class MarkReleasing implements Cmd {
  constructor(
    readonly ip: string,
    readonly freeSinceBeforeOffsetMs: number | undefined,
  ) {}
  check = (): boolean => true;
  async run(m: LeaseModel, r: RealNode): Promise<void> {
    const now = BASE_MS + m.nowMs;
    const before = this.freeSinceBeforeOffsetMs === undefined ? undefined : now - this.freeSinceBeforeOffsetMs;
    const current = m.leases.get(this.ip);
    const call = () => r.store.markReleasing(r.arn, this.ip, now, before);
    if (!current) return expectError(`markReleasing ${this.ip}`, call, LeaseNotFoundError);
    const free =
      (current.state === 'FREE' || current.state === 'COOLDOWN') &&
      (before === undefined || (current.reusableAtMs ?? 0) <= before);
    const retried = current.state === 'RELEASING' && current.releasedAtMs === now;
    if (!free && !retried) {
      await expectError(`markReleasing ${this.ip} (${current.state})`, call, LeaseConflictError);
    } else {
      const lease = await call();
      if (lease.state !== 'RELEASING') fail(`markReleasing gave ${lease.state}`);
      m.leases.set(this.ip, { state: 'RELEASING', releasedAtMs: now });
    }
    await assertSameAsModel(m, r);
  }
  toString = (): string => `markReleasing(${this.ip}, ${this.freeSinceBeforeOffsetMs})`;
}

class RevertReleasing implements Cmd {
  constructor(readonly ip: string) {}
  check = (): boolean => true;
  async run(m: LeaseModel, r: RealNode): Promise<void> {
    const now = BASE_MS + m.nowMs;
    const current = m.leases.get(this.ip);
    const call = () => r.store.revertReleasing(r.arn, this.ip, now);
    if (!current) return expectError(`revert ${this.ip}`, call, LeaseNotFoundError);
    if (current.state !== 'RELEASING') return expectError(`revert ${this.ip}`, call, LeaseConflictError);
    await call();
    m.leases.set(this.ip, { state: 'FREE', reusableAtMs: now });
    await assertSameAsModel(m, r);
  }
  toString = (): string => `revertReleasing(${this.ip})`;
}

class DeleteReleasing implements Cmd {
  constructor(readonly ip: string) {}
  check = (): boolean => true;
  async run(m: LeaseModel, r: RealNode): Promise<void> {
    const current = m.leases.get(this.ip);
    const call = () => r.store.deleteReleasing(r.arn, this.ip);
    // Invariant 6: never a blind delete — a lease that is not RELEASING stays.
    if (current && current.state !== 'RELEASING') return expectError(`delete ${this.ip}`, call, LeaseConflictError);
    await call();
    m.leases.delete(this.ip);
    await assertSameAsModel(m, r);
  }
  toString = (): string => `deleteReleasing(${this.ip})`;
}

class Tick implements Cmd {
  constructor(readonly ms: number) {}
  check = (): boolean => true;
  async run(m: LeaseModel, r: RealNode): Promise<void> {
    m.nowMs += this.ms;
    const now = BASE_MS + m.nowMs;
    const count = await r.store.countClaimable(r.arn, now);
    const expected = claimable({ ...m, nowMs: now }).length;
    if (count !== expected) fail(`countClaimable ${count}, model ${expected}`);
  }
  toString = (): string => `tick(${this.ms})`;
}

const ip = fc.constantFrom(...IPS);
const holder = fc.constantFrom(...HOLDERS);

export const leaseCommands: fc.Arbitrary<Cmd>[] = [
  fc.uniqueArray(ip, { minLength: 1, maxLength: 3 }).map((ips) => new PutLeases(ips)),
  holder.map((h) => new Claim(h)),
  holder.map((h) => new Claim(h)),
  fc
    .tuple(
      holder,
      fc.constantFrom('none', 'own', 'other') as fc.Arbitrary<'none' | 'own' | 'other'>,
      fc.constantFrom(0, 50, 500),
    )
    .map(([h, by, wait]) => new Release(h, by, wait)),
  fc.tuple(ip, fc.option(fc.constantFrom(0, 100, 1000), { nil: undefined })).map(([i, o]) => new MarkReleasing(i, o)),
  ip.map((i) => new RevertReleasing(i)),
  ip.map((i) => new DeleteReleasing(i)),
  fc.constantFrom(0, 60, 600).map((ms) => new Tick(ms)),
];

/** Relies on nothing but the store: starts with the first half of the addresses FREE. */
export async function seedModel(real: RealNode): Promise<LeaseModel> {
  const model: LeaseModel = { leases: new Map(), nowMs: 0 };
  const first = IPS.slice(0, 3);
  await real.store.putLeases(
    first.map((i) => newLease(real.arn, i)),
    BASE_MS,
  );
  for (const i of first) model.leases.set(i, { state: 'FREE', reusableAtMs: BASE_MS });
  return model;
}
