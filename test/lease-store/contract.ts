import { beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../shared/clock.js';
import type { Lease } from '../../shared/domain/lease.js';
import {
  LeaseConflictError,
  LeaseNotFoundError,
  NodeNotFoundError,
  NoFreeLeaseError,
  ValidationError,
  VersionConflictError,
} from '../../shared/errors.js';
import type { LeaseStore, NodeCursor, NodeRefPage } from '../../shared/lease-store/port.js';
import { holder, newInstanceArn, newLeases, nodeRecord } from './fixtures.js';

const REUSE_WAIT_MS = 30_000;

/**
 * The behaviour every LeaseStore must have — the DynamoDB adapter (over both DynamoDB clients, on dynalite)
 * and the memory fake run this same suite. `makeStore` is called before every test.
 */
export function leaseStoreContract(label: string, makeStore: () => Promise<LeaseStore>): void {
  describe(`LeaseStore contract: ${label}`, () => {
    let store: LeaseStore;
    let clock: ManualClock;
    let arn: string;

    beforeEach(async () => {
      store = await makeStore();
      clock = new ManualClock();
      arn = newInstanceArn();
    });

    describe('putLeases', () => {
      it('writes FREE leases that are claimable from now', async () => {
        await store.putLeases(newLeases(arn, 5), clock.nowMs());
        const leases = await store.listLeases(arn);
        expect(leases).toHaveLength(5);
        for (const lease of leases) {
          expect(lease).toMatchObject({ state: 'FREE', instanceArn: arn, reusableAtMs: clock.nowMs(), version: 1 });
          expect(lease.holder).toBeUndefined();
        }
        expect(await store.countClaimable(arn, clock.nowMs())).toBe(5);
        expect(await store.countClaimable(arn, clock.nowMs() - 1)).toBe(0);
      });

      it('keeps every field of the placement', async () => {
        const [input] = newLeases(arn, 1, { prefix: '10.0.1.0/28', deviceIndex: 2, mac: '0a:1b:2c:3d:4e:5f' });
        await store.putLeases([input!], clock.nowMs());
        expect(await store.getLease(arn, input!.ip)).toEqual({
          ...input,
          state: 'FREE',
          createdAtMs: clock.nowMs(),
          reusableAtMs: clock.nowMs(),
          version: 1,
        });
      });

      it('does not reset a CLAIMED lease when a resumed launch writes the same leases again', async () => {
        const first = newLeases(arn, 5);
        await store.putLeases(first, clock.nowMs());
        const claimed = await store.claim(arn, holder(1), clock.nowMs());
        clock.advance(1000);
        await store.putLeases(newLeases(arn, 7), clock.nowMs());
        expect(await store.getLease(arn, claimed.ip)).toEqual(claimed);
        const all = await store.listLeases(arn);
        expect(all).toHaveLength(7);
        expect(all.filter((l) => l.state === 'CLAIMED').map((l) => l.ip)).toEqual([claimed.ip]);
      });

      it('rejects a batch with one bad lease and writes none of it', async () => {
        const leases = newLeases(arn, 4);
        const bad = [...leases.slice(0, 3), { ...leases[3]!, ip: '10.0.1.300' }];
        await expect(store.putLeases(bad, clock.nowMs())).rejects.toBeInstanceOf(ValidationError);
        const outside = [...leases.slice(0, 3), { ...leases[3]!, ip: '192.168.0.1' }];
        await expect(store.putLeases(outside, clock.nowMs())).rejects.toThrow(/outside subnet/);
        const badArn = leases.map((l) => ({ ...l, instanceArn: 'arn:aws:ec2:eu-west-1:123:instance/i-1' }));
        await expect(store.putLeases(badArn, clock.nowMs())).rejects.toThrow(/instanceArn/);
        await expect(store.putLeases([leases[0]!, leases[0]!], clock.nowMs())).rejects.toThrow(/twice/);
        expect(await store.listLeases(arn)).toEqual([]);
      });
    });

    describe('claim', () => {
      it('claims a FREE lease for the holder', async () => {
        await store.putLeases(newLeases(arn, 3), clock.nowMs());
        clock.advance(5);
        const lease = await store.claim(arn, holder(1), clock.nowMs());
        expect(lease).toMatchObject({ state: 'CLAIMED', holder: holder(1), claimedAtMs: clock.nowMs(), version: 2 });
        expect(lease.reusableAtMs).toBeUndefined();
        expect(await store.getLease(arn, lease.ip)).toEqual(lease);
        expect(await store.countClaimable(arn, clock.nowMs())).toBe(2);
      });

      it('returns the same lease, unchanged, to a repeated ADD of the same (containerId, ifName)', async () => {
        await store.putLeases(newLeases(arn, 3), clock.nowMs());
        const first = await store.claim(arn, holder(1), clock.nowMs());
        clock.advance(1000);
        const again = await store.claim(arn, holder(1), clock.nowMs());
        expect(again).toEqual(first);
        const other = await store.claim(arn, holder(1, { ifName: 'net1' }), clock.nowMs());
        expect(other.ip).not.toBe(first.ip);
        expect(await store.listLeases(arn, { state: 'CLAIMED' })).toHaveLength(2);
      });

      it('throws NoFreeLeaseError when every lease is claimed', async () => {
        await store.putLeases(newLeases(arn, 2), clock.nowMs());
        await store.claim(arn, holder(1), clock.nowMs());
        await store.claim(arn, holder(2), clock.nowMs());
        await expect(store.claim(arn, holder(3), clock.nowMs())).rejects.toBeInstanceOf(NoFreeLeaseError);
      });

      it('does not claim a lease put after now', async () => {
        await store.putLeases(newLeases(arn, 1), clock.nowMs() + 10);
        await expect(store.claim(arn, holder(1), clock.nowMs())).rejects.toBeInstanceOf(NoFreeLeaseError);
      });

      it('prefers the lease that has been claimable longest when given one candidate', async () => {
        const [a, b] = newLeases(arn, 2);
        await store.putLeases([a!], clock.nowMs() + 100);
        await store.putLeases([b!], clock.nowMs());
        clock.advance(200);
        const lease = await store.claim(arn, holder(1), clock.nowMs(), { candidates: 1 });
        expect(lease.ip).toBe(b!.ip);
      });

      it('gives 64 concurrent claimers of 40 leases 40 distinct addresses and 24 NoFreeLeaseErrors', async () => {
        await store.putLeases(newLeases(arn, 40), clock.nowMs());
        const results = await Promise.allSettled(
          Array.from({ length: 64 }, (_, i) => store.claim(arn, holder(i), clock.nowMs())),
        );
        const won = results.flatMap((r, i) => (r.status === 'fulfilled' ? [{ i, lease: r.value }] : []));
        const lost = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
        expect(won).toHaveLength(40);
        expect(new Set(won.map((w) => w.lease.ip)).size).toBe(40);
        expect(lost).toHaveLength(24);
        for (const reason of lost) expect(reason).toBeInstanceOf(NoFreeLeaseError);
        // The store agrees with what each winner was told.
        const claimed = await store.listLeases(arn, { state: 'CLAIMED' });
        expect(claimed).toHaveLength(40);
        const byIp = new Map(claimed.map((l) => [l.ip, l]));
        for (const { i, lease } of won) expect(byIp.get(lease.ip)?.holder?.containerId).toBe(`container-${i}`);
      });

      it('never lets a claim and the release handshake both win the same lease', async () => {
        const leases = newLeases(arn, 12);
        await store.putLeases(leases, clock.nowMs());
        const claims = Array.from({ length: 12 }, (_, i) => store.claim(arn, holder(i), clock.nowMs()));
        const marks = leases.map((l) => store.markReleasing(arn, l.ip, clock.nowMs()));
        const [claimResults, markResults] = await Promise.all([Promise.allSettled(claims), Promise.allSettled(marks)]);
        const claimedIps = claimResults.flatMap((r) => (r.status === 'fulfilled' ? [r.value.ip] : []));
        const releasingIps = markResults.flatMap((r) => (r.status === 'fulfilled' ? [r.value.ip] : []));
        for (const r of markResults) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(LeaseConflictError);
        for (const r of claimResults) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(NoFreeLeaseError);
        expect(claimedIps.filter((ip) => releasingIps.includes(ip))).toEqual([]);
        expect(claimedIps.length + releasingIps.length).toBe(12);
        const final = await store.listLeases(arn);
        expect(
          final
            .filter((l) => l.state === 'CLAIMED')
            .map((l) => l.ip)
            .sort(),
        ).toEqual([...claimedIps].sort());
        expect(
          final
            .filter((l) => l.state === 'RELEASING')
            .map((l) => l.ip)
            .sort(),
        ).toEqual([...releasingIps].sort());
      });

      it('rejects bad input with ValidationError and writes nothing', async () => {
        await store.putLeases(newLeases(arn, 2), clock.nowMs());
        const now = clock.nowMs();
        await expect(store.claim('i-0123456789abcdef0', holder(1), now)).rejects.toBeInstanceOf(ValidationError);
        await expect(store.claim(arn, holder(1, { containerId: '' }), now)).rejects.toBeInstanceOf(ValidationError);
        await expect(store.claim(arn, holder(1, { ifName: ' ' }), now)).rejects.toBeInstanceOf(ValidationError);
        await expect(store.claim(arn, holder(1, { netns: '' }), now)).rejects.toBeInstanceOf(ValidationError);
        await expect(store.claim(arn, holder(1), Number.NaN)).rejects.toBeInstanceOf(ValidationError);
        await expect(store.claim(arn, holder(1), now, { candidates: 0 })).rejects.toBeInstanceOf(ValidationError);
        expect((await store.listLeases(arn)).every((l) => l.state === 'FREE' && l.version === 1)).toBe(true);
      });
    });

    describe('release', () => {
      it('moves the lease to COOLDOWN, claimable again only once reuseWaitMs has passed', async () => {
        await store.putLeases(newLeases(arn, 1), clock.nowMs());
        const claimed = await store.claim(arn, holder(1), clock.nowMs());
        clock.advance(1000);
        const released = await store.release(arn, holder(1), clock.nowMs(), REUSE_WAIT_MS, claimed.ip);
        expect(released).toMatchObject({
          ip: claimed.ip,
          state: 'COOLDOWN',
          releasedAtMs: clock.nowMs(),
          reusableAtMs: clock.nowMs() + REUSE_WAIT_MS,
          claimedAtMs: claimed.claimedAtMs,
          version: claimed.version + 1,
        });
        expect(released?.holder).toBeUndefined();
        clock.advance(REUSE_WAIT_MS - 1);
        expect(await store.countClaimable(arn, clock.nowMs())).toBe(0);
        await expect(store.claim(arn, holder(2), clock.nowMs())).rejects.toBeInstanceOf(NoFreeLeaseError);
        clock.advance(1);
        expect(await store.countClaimable(arn, clock.nowMs())).toBe(1);
        const reclaimed = await store.claim(arn, holder(2), clock.nowMs());
        expect(reclaimed).toMatchObject({ ip: claimed.ip, holder: holder(2), state: 'CLAIMED' });
      });

      it('finds the lease by holder when the address is not given', async () => {
        await store.putLeases(newLeases(arn, 3), clock.nowMs());
        const claimed = await store.claim(arn, holder(1), clock.nowMs());
        expect(await store.findByHolder(arn, 'container-1', 'eth0')).toEqual(claimed);
        const released = await store.release(arn, holder(1), clock.nowMs(), REUSE_WAIT_MS);
        expect(released?.ip).toBe(claimed.ip);
        expect(await store.findByHolder(arn, 'container-1', 'eth0')).toBeUndefined();
      });

      it('is idempotent and never releases a lease held by someone else', async () => {
        await store.putLeases(newLeases(arn, 2), clock.nowMs());
        const mine = await store.claim(arn, holder(1), clock.nowMs());
        const theirs = await store.claim(arn, holder(2), clock.nowMs());
        expect(await store.release(arn, holder(1), clock.nowMs(), 0, theirs.ip)).toBeUndefined();
        expect(await store.getLease(arn, theirs.ip)).toEqual(theirs);
        expect(await store.release(arn, holder(1), clock.nowMs(), 0, mine.ip)).toBeDefined();
        expect(await store.release(arn, holder(1), clock.nowMs(), 0, mine.ip)).toBeUndefined();
        expect(await store.release(arn, holder(1), clock.nowMs(), 0)).toBeUndefined();
        expect(await store.release(arn, holder(9), clock.nowMs(), 0, '10.0.200.1')).toBeUndefined();
        expect((await store.getLease(arn, mine.ip))?.state).toBe('COOLDOWN');
      });

      it('rejects bad input with ValidationError', async () => {
        await expect(store.release(arn, { containerId: '', ifName: 'eth0' }, 0, 0)).rejects.toBeInstanceOf(
          ValidationError,
        );
        await expect(store.release(arn, holder(1), 0, 0, '10.0.0')).rejects.toBeInstanceOf(ValidationError);
        await expect(store.release(arn, holder(1), 0, -1)).rejects.toBeInstanceOf(ValidationError);
        await expect(store.findByHolder('arn:aws:ec2::x', 'c', 'eth0')).rejects.toBeInstanceOf(ValidationError);
        await expect(store.findByHolder(arn, 'c', '')).rejects.toBeInstanceOf(ValidationError);
      });
    });

    describe('release handshake', () => {
      it('never hands out a RELEASING lease, even long after its reusableAt', async () => {
        const leases = newLeases(arn, 3);
        await store.putLeases(leases, clock.nowMs());
        const claimed = await store.claim(arn, holder(1), clock.nowMs());
        await store.release(arn, holder(1), clock.nowMs(), 10, claimed.ip);
        const other = leases.find((l) => l.ip !== claimed.ip)!;
        clock.advance(20);
        const inCooldown = await store.markReleasing(arn, claimed.ip, clock.nowMs());
        const free = await store.markReleasing(arn, other.ip, clock.nowMs());
        expect(inCooldown).toMatchObject({ state: 'RELEASING', releasedAtMs: clock.nowMs() });
        expect(inCooldown.reusableAtMs).toBeUndefined();
        expect(free.state).toBe('RELEASING');
        clock.advance(86_400_000);
        expect(await store.countClaimable(arn, clock.nowMs())).toBe(1);
        const last = await store.claim(arn, holder(2), clock.nowMs());
        expect([claimed.ip, other.ip]).not.toContain(last.ip);
        await expect(store.claim(arn, holder(3), clock.nowMs())).rejects.toBeInstanceOf(NoFreeLeaseError);
      });

      it('refuses to mark a CLAIMED lease, or one free only since after freeSinceBeforeMs', async () => {
        await store.putLeases(newLeases(arn, 2), clock.nowMs());
        const claimed = await store.claim(arn, holder(1), clock.nowMs());
        const err = await store.markReleasing(arn, claimed.ip, clock.nowMs()).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(LeaseConflictError);
        expect((err as LeaseConflictError).current).toMatchObject({ state: 'CLAIMED', ip: claimed.ip });
        expect(await store.getLease(arn, claimed.ip)).toEqual(claimed);
        const free = (await store.listLeases(arn, { state: 'FREE' }))[0]!;
        await expect(store.markReleasing(arn, free.ip, clock.nowMs(), clock.nowMs() - 1)).rejects.toBeInstanceOf(
          LeaseConflictError,
        );
        expect((await store.getLease(arn, free.ip))?.state).toBe('FREE');
        expect((await store.markReleasing(arn, free.ip, clock.nowMs(), clock.nowMs())).state).toBe('RELEASING');
        await expect(store.markReleasing(arn, '10.0.99.99', clock.nowMs())).rejects.toBeInstanceOf(LeaseNotFoundError);
      });

      it('treats a retried markReleasing (same nowMs) as the success it was', async () => {
        const [lease] = newLeases(arn, 1);
        await store.putLeases([lease!], clock.nowMs());
        const first = await store.markReleasing(arn, lease!.ip, clock.nowMs());
        const retried = await store.markReleasing(arn, lease!.ip, clock.nowMs());
        expect(retried.state).toBe('RELEASING');
        expect(retried.version).toBe(first.version + 1);
        clock.advance(1);
        await expect(store.markReleasing(arn, lease!.ip, clock.nowMs())).rejects.toBeInstanceOf(LeaseConflictError);
      });

      it('deletes only a RELEASING lease, and a missing one is already done', async () => {
        const [a, b] = newLeases(arn, 2);
        await store.putLeases([a!, b!], clock.nowMs());
        const err = await store.deleteReleasing(arn, a!.ip).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(LeaseConflictError);
        expect((err as LeaseConflictError).current).toMatchObject({ state: 'FREE' });
        expect(await store.getLease(arn, a!.ip)).toBeDefined();
        await store.markReleasing(arn, a!.ip, clock.nowMs());
        await store.deleteReleasing(arn, a!.ip);
        expect(await store.getLease(arn, a!.ip)).toBeUndefined();
        await store.deleteReleasing(arn, a!.ip);
        expect((await store.listLeases(arn)).map((l) => l.ip)).toEqual([b!.ip]);
      });

      it('reverts RELEASING to FREE, claimable from then, and nothing else', async () => {
        const [a] = newLeases(arn, 1);
        await store.putLeases([a!], clock.nowMs());
        await expect(store.revertReleasing(arn, a!.ip, clock.nowMs())).rejects.toBeInstanceOf(LeaseConflictError);
        await store.markReleasing(arn, a!.ip, clock.nowMs());
        clock.advance(50);
        const reverted = await store.revertReleasing(arn, a!.ip, clock.nowMs());
        expect(reverted).toMatchObject({ state: 'FREE', reusableAtMs: clock.nowMs() });
        expect((await store.claim(arn, holder(1), clock.nowMs())).ip).toBe(a!.ip);
        await expect(store.revertReleasing(arn, '10.0.9.9', clock.nowMs())).rejects.toBeInstanceOf(LeaseNotFoundError);
      });
    });

    describe('partitions', () => {
      it('never returns one node’s leases to a claim on another', async () => {
        const other = newInstanceArn();
        await store.putLeases(newLeases(arn, 3), clock.nowMs());
        // Same addresses on the other node: only the partition key tells them apart.
        await store.putLeases(newLeases(other, 5), clock.nowMs());
        const got: Lease[] = [];
        for (let i = 0; i < 3; i++) got.push(await store.claim(arn, holder(i), clock.nowMs()));
        await expect(store.claim(arn, holder(9), clock.nowMs())).rejects.toBeInstanceOf(NoFreeLeaseError);
        expect(got.every((l) => l.instanceArn === arn)).toBe(true);
        expect(await store.countClaimable(other, clock.nowMs())).toBe(5);
        expect(await store.findByHolder(other, 'container-0', 'eth0')).toBeUndefined();
      });

      it('deletes a whole partition and nothing else', async () => {
        const other = newInstanceArn();
        await store.putLeases(newLeases(arn, 30), clock.nowMs());
        await store.putLeases(newLeases(other, 2), clock.nowMs());
        await store.createNode(nodeRecord(arn));
        expect(await store.deleteNodePartition(arn)).toBe(31);
        expect(await store.listLeases(arn)).toEqual([]);
        expect(await store.getNode(arn)).toBeUndefined();
        expect(await store.listLeases(other)).toHaveLength(2);
        expect(await store.deleteNodePartition(arn)).toBe(0);
      });
    });

    describe('node item', () => {
      it('creates once and reads back what was written', async () => {
        const node = nodeRecord(arn);
        expect(await store.createNode(node)).toBe(true);
        expect(await store.createNode({ ...node, phase: 'READY' })).toBe(false);
        expect(await store.getNode(arn)).toEqual(node);
        expect((await store.listNodes()).find((n) => n.instanceArn === arn)).toEqual(node);
      });

      it('walks every node through the node index in pages, resuming at the cursor, leases left out', async () => {
        const arns = Array.from({ length: 7 }, () => newInstanceArn());
        for (const a of arns) {
          await store.createNode(nodeRecord(a, { phase: 'READY' }));
          await store.putLeases(newLeases(a, 3), 1_000);
        }
        const seen: string[] = [];
        let from: NodeCursor | undefined = { shard: 0 };
        let pages = 0;
        while (from) {
          const page: NodeRefPage = await store.listNodeRefs(from, 2);
          expect(page.refs.length).toBeLessThanOrEqual(2);
          seen.push(...page.refs.map((r) => r.instanceArn));
          from = page.next;
          pages += 1;
          if (pages > 100) throw new Error('the node walk does not end');
        }
        // Other tests' nodes share the table: ours are all there, once each, and nothing else but nodes.
        for (const a of arns) expect(seen.filter((x) => x === a)).toHaveLength(1);
        expect(new Set(seen).size).toBe(seen.length);
        const ref = (await store.listNodeRefs({ shard: 0 }, 10_000)).refs.find((r) => r.instanceArn === arns[0]);
        expect(ref).toMatchObject({ instanceArn: arns[0], phase: 'READY', version: nodeRecord(arns[0]!).version });
        await expect(store.listNodeRefs({ shard: -1 })).rejects.toBeInstanceOf(ValidationError);
        await expect(store.listNodeRefs({ shard: 0 }, 0)).rejects.toBeInstanceOf(ValidationError);
      });

      it('updates with optimistic versioning: of two writers at the same version one wins', async () => {
        const node = nodeRecord(arn);
        await store.createNode(node);
        const v2 = await store.updateNode({ ...node, phase: 'PROVISIONING' }, node.version);
        expect(v2.version).toBe(node.version + 1);
        const results = await Promise.allSettled([
          store.updateNode({ ...v2, phase: 'READY' }, v2.version),
          store.updateNode({ ...v2, phase: 'FAILED', failureReason: 'test' }, v2.version),
        ]);
        const won = results.filter((r) => r.status === 'fulfilled');
        const lost = results.filter((r) => r.status === 'rejected');
        expect(won).toHaveLength(1);
        expect(lost).toHaveLength(1);
        expect((lost[0] as PromiseRejectedResult).reason).toBeInstanceOf(VersionConflictError);
        const stored = await store.getNode(arn);
        expect(stored).toEqual((won[0] as PromiseFulfilledResult<unknown>).value);
        expect(stored?.version).toBe(v2.version + 1);
      });

      it('throws NodeNotFoundError when updating a node that was never created', async () => {
        await expect(store.updateNode(nodeRecord(arn), 1)).rejects.toBeInstanceOf(NodeNotFoundError);
      });

      it('rejects a malformed node record', async () => {
        await expect(store.createNode(nodeRecord(arn, { instanceArn: 'nope' }))).rejects.toBeInstanceOf(
          ValidationError,
        );
        await expect(store.createNode(nodeRecord(arn, { instanceId: 'i-00000000' }))).rejects.toBeInstanceOf(
          ValidationError,
        );
        expect(await store.getNode(arn)).toBeUndefined();
      });
    });

    describe('input checks', () => {
      // One bad argument per method: both stores run validate.ts's leaseStoreChecks, so both must refuse each.
      const badArn = 'arn:aws:ec2::x';
      const calls: Record<Exclude<keyof LeaseStore, 'listNodes'>, (s: LeaseStore, a: string) => Promise<unknown>> = {
        putLeases: (s, a) => s.putLeases(newLeases(a, 1), -1),
        claim: (s, a) => s.claim(a, holder(1), 0, { maxAttempts: 0 }),
        findByHolder: (s) => s.findByHolder(badArn, 'c', 'eth0'),
        release: (s, a) => s.release(a, holder(1), 0, Number.NaN),
        markReleasing: (s, a) => s.markReleasing(a, '10.0.0.1', 0, -5),
        revertReleasing: (s, a) => s.revertReleasing(a, '10.0.0', 0),
        deleteReleasing: (s, a) => s.deleteReleasing(a, '2600:1F18::1'),
        deleteNodePartition: (s) => s.deleteNodePartition('i-0123456789abcdef0'),
        getLease: (s, a) => s.getLease(a, '10.0.0'),
        listLeases: (s, a) => s.listLeases(a, { state: 'GONE' as Lease['state'] }),
        countClaimable: (s, a) => s.countClaimable(a, 1.5),
        getNode: (s) => s.getNode(badArn),
        createNode: (s, a) => s.createNode(nodeRecord(a, { maxPods: -1 })),
        updateNode: (s, a) => s.updateNode(nodeRecord(a), -1),
        acquirePassMarker: (s, a) => s.acquirePassMarker(a, 'me', 0, -1),
        releasePassMarker: (s) => s.releasePassMarker(badArn, 'me'),
        listNodeRefs: (s) => s.listNodeRefs({ shard: 0, afterArn: badArn }),
      };
      it.each(Object.entries(calls))(
        '%s refuses a bad argument with ValidationError and writes nothing',
        async (_, call) => {
          await expect(call(store, arn)).rejects.toBeInstanceOf(ValidationError);
          expect(await store.listLeases(arn)).toEqual([]);
          expect(await store.getNode(arn)).toBeUndefined();
        },
      );
    });
  });
}
