import { afterEach, describe, expect, it } from 'vitest';
import { LeaseConflictError, NoFreeLeaseError, StoreUnavailableError } from '../../shared/errors.js';
import type { LeaseStore } from '../../shared/lease-store/port.js';
import { manageNodePool, type NodePoolReport } from '../../shared/pool/pool-manager.js';
import { claimOne, invariantViolations, type PoolEnv, readyNode, startPoolEnv } from './support.js';

let env: PoolEnv | undefined;

afterEach(async () => {
  await env?.close();
  env = undefined;
});

const RELEASE_DELAY_MS = 300_000;
const RESUME_AFTER_MS = 120_000;

/** The store, with the next `times` calls of `operation` failing as an unreachable DynamoDB would. */
function failing(store: LeaseStore, operation: keyof LeaseStore, times = 1, afterCalls = 0): LeaseStore {
  let calls = 0;
  let left = times;
  return new Proxy(store, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function') return value;
      if (prop !== operation) return value.bind(target);
      return async (...args: unknown[]) => {
        calls += 1;
        if (calls > afterCalls && left > 0) {
          left -= 1;
          throw new StoreUnavailableError(`injected: ${String(prop)} failed`);
        }
        return (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
      };
    },
  });
}

async function eniState(e: PoolEnv, arn: string, eniId: string) {
  const [eni] = await e.ec2.describeNetworkInterfaces({ eniIds: [eniId] });
  const leases = await e.store.listLeases(arn);
  const node = await e.store.getNode(arn);
  return {
    inEc2: [...(eni?.secondaryIps ?? [])].sort(),
    leased: leases.map((l) => l.ip).sort(),
    byState: (state: string) =>
      leases
        .filter((l) => l.state === state)
        .map((l) => l.ip)
        .sort(),
    recorded: [...(node?.enis.find((x) => x.eniId === eniId)?.addresses ?? [])].sort(),
  };
}

/** A READY node whose one ENI holds 9 addresses, all idle past the release delay: 3 above the high watermark. */
async function withExcess(e: PoolEnv): Promise<{ instanceArn: string; eniId: string }> {
  const { instanceArn, node } = await readyNode(e, { enis: [{ ipCount: 9 }] });
  e.clock.advance(RELEASE_DELAY_MS);
  return { instanceArn, eniId: node.enis[0]!.eniId! };
}

/**
 * A pass after the resume delay finishes what an interrupted handshake left RELEASING: EC2, the leases and the
 * node item then name the same addresses, none RELEASING, and no invariant is broken.
 */
async function expectResumedInStep(instanceArn: string, eniId: string): Promise<NodePoolReport> {
  const e = env!;
  e.clock.advance(RESUME_AFTER_MS);
  const report = await manageNodePool(e.deps(), instanceArn);
  const s = await eniState(e, instanceArn, eniId);
  expect(s.leased).toEqual(s.inEc2);
  expect(s.recorded).toEqual(s.inEc2);
  expect(s.byState('RELEASING')).toEqual([]);
  expect(await invariantViolations(e)).toBe('');
  return report;
}

describe('Pool: release of excess', () => {
  it('releases idle excess through RELEASING → Unassign → delete, down to the high watermark', async () => {
    env = await startPoolEnv();
    const { instanceArn, node } = await readyNode(env, { enis: [{ ipCount: 9 }] });
    const eniId = node.enis[0]!.eniId!;
    env.clock.advance(RELEASE_DELAY_MS);

    const report = await manageNodePool(env.deps(), instanceArn);

    expect(report.excess).toBe(3); // spare 9 − high 6
    expect(report.released).toHaveLength(3);
    const s = await eniState(env, instanceArn, eniId);
    expect(s.inEc2).toHaveLength(6);
    expect(s.leased).toEqual(s.inEc2);
    expect(s.recorded).toEqual(s.inEc2);
    expect(report.released.some((ip) => s.inEc2.includes(ip))).toBe(false);
    expect(env.sim.admin.counts()['UnassignPrivateIpAddresses']?.ok).toBe(1); // one call per ENI
    expect(await invariantViolations(env)).toBe('');
  });

  it('releases nothing that became claimable less than the release delay ago', async () => {
    env = await startPoolEnv();
    const { instanceArn } = await readyNode(env, { enis: [{ ipCount: 9 }] });
    env.clock.advance(RELEASE_DELAY_MS - 1);

    const report = await manageNodePool(env.deps(), instanceArn);

    expect(report.excess).toBe(0);
    expect(env.sim.admin.counts()['UnassignPrivateIpAddresses']).toBeUndefined();
  });

  it('never releases a CLAIMED lease nor loses an address while pods claim and release concurrently', async () => {
    env = await startPoolEnv({ config: { minLeases: 2, warmLowLeases: 2, warmHighLeases: 4 } });
    for (let iteration = 0; iteration < 2; iteration++) {
      const { instanceArn, node } = await readyNode(env, { instanceType: 'c5.4xlarge', enis: [{ ipCount: 24 }] });
      const eniId = node.enis[0]!.eniId!;
      env.clock.advance(RELEASE_DELAY_MS);
      const held = new Map<string, string>();
      const released = new Set<string>();
      // A pod that finds nothing left (the passes got there first) or loses every race is a legitimate outcome:
      // kubelet retries it. How often depends on timing, so it is counted and reported, not asserted.
      const refused: string[] = [];
      const pods = async (): Promise<void> => {
        for (let i = 0; i < 6; i++) {
          let pod: { containerId: string; ip: string };
          try {
            pod = await claimOne(env!, instanceArn);
          } catch (err) {
            if (!(err instanceof NoFreeLeaseError || err instanceof LeaseConflictError)) throw err;
            refused.push(err.name);
            continue;
          }
          held.set(pod.containerId, pod.ip);
          if (i % 3 === 2) {
            // Some pods go away again: DEL → COOLDOWN (not releasable: it has not been idle for the delay).
            await env!.store.release(
              instanceArn,
              { containerId: pod.containerId, ifName: 'eth0' },
              env!.clock.nowMs(),
              30_000,
              pod.ip,
            );
            held.delete(pod.containerId);
            released.add(pod.ip);
          }
        }
      };
      // allSettled: a failure must not leave the others writing into the store the test is about to close.
      const settled = await Promise.allSettled([
        manageNodePool(env.deps(), instanceArn),
        manageNodePool(env.deps(), instanceArn),
        pods(),
        pods(),
      ]);
      for (const r of settled) if (r.status === 'rejected') throw r.reason;
      const reports = settled.slice(0, 2).map((r) => (r as PromiseFulfilledResult<NodePoolReport>).value);
      if (refused.length > 0)
        console.log(`iteration ${iteration}: ${refused.length} claims refused (${refused.join(', ')})`);

      const s = await eniState(env, instanceArn, eniId);
      const leases = await env.store.listLeases(instanceArn);
      for (const [containerId, ip] of held) {
        const lease = leases.find((l) => l.ip === ip);
        expect(lease?.state, `lease of ${containerId}`).toBe('CLAIMED');
        expect(lease?.holder?.containerId).toBe(containerId);
        expect(s.inEc2).toContain(ip);
      }
      expect(held.size, 'no pod got an address: the test raced nothing').toBeGreaterThan(0);
      const gone = reports.flatMap((r) => r.released);
      for (const ip of held.values()) expect(gone).not.toContain(ip);
      // No address lost: EC2, the node item and the leases name the same addresses.
      expect(s.leased).toEqual(s.inEc2);
      expect(s.recorded).toEqual(s.inEc2);
      expect(gone.length).toBeGreaterThan(0);
      expect(await invariantViolations(env)).toBe('');
    }
  });

  describe('failures between the handshake steps', () => {
    it('rolls the marks back when the only Unassign attempt is throttled', async () => {
      env = await startPoolEnv({ maxAttempts: 1 });
      const { instanceArn, eniId } = await withExcess(env);
      env.sim.admin.failNext({ action: 'UnassignPrivateIpAddresses', code: 'RequestLimitExceeded' });

      const report = await manageNodePool(env.deps(), instanceArn);

      expect(report.released).toEqual([]);
      expect(report.pendingRelease).toEqual([]);
      const s = await eniState(env, instanceArn, eniId);
      expect(s.inEc2).toHaveLength(9);
      expect(s.byState('FREE')).toEqual(s.inEc2);
      expect(await env.store.countClaimable(instanceArn, env.clock.nowMs())).toBe(9);
      expect(await invariantViolations(env)).toBe('');
    });

    it('keeps RELEASING when retried attempts end throttled (an earlier one may have landed)', async () => {
      env = await startPoolEnv({ maxAttempts: 2 });
      const { instanceArn, eniId } = await withExcess(env);
      // Attempt 1 unassigns and answers 500; attempt 2 is throttled: the addresses are gone in EC2.
      env.sim.admin.failNext({ action: 'UnassignPrivateIpAddresses', code: 'InternalError', phase: 'after' });
      env.sim.admin.failNext({ action: 'UnassignPrivateIpAddresses', code: 'RequestLimitExceeded' });

      const first = await manageNodePool(env.deps(), instanceArn);

      expect(first.pendingRelease).toHaveLength(3);
      const s = await eniState(env, instanceArn, eniId);
      expect(s.inEc2).toHaveLength(6);
      // Rolling back would have made 3 unassigned addresses claimable; they are RELEASING instead.
      expect(s.byState('RELEASING')).toEqual([...first.pendingRelease].sort());
      expect(await invariantViolations(env)).toBe('');

      await expectResumedInStep(instanceArn, eniId);
    });

    it('keeps RELEASING (never FREE) when the Unassign answer is lost, then finishes on resume', async () => {
      env = await startPoolEnv();
      const { instanceArn, eniId } = await withExcess(env);
      // Unassign takes effect, the answer is a 500; the SDK's retry then finds the addresses gone (400).
      env.sim.admin.failNext({ action: 'UnassignPrivateIpAddresses', code: 'InternalError', phase: 'after' });

      const first = await manageNodePool(env.deps(), instanceArn);

      expect(first.pendingRelease).toHaveLength(3);
      const s = await eniState(env, instanceArn, eniId);
      expect(s.inEc2).toHaveLength(6);
      expect(s.byState('RELEASING')).toEqual([...first.pendingRelease].sort());
      for (const ip of first.pendingRelease) expect(s.inEc2).not.toContain(ip);
      expect(await env.store.countClaimable(instanceArn, env.clock.nowMs())).toBe(6);
      expect(await invariantViolations(env)).toBe('');

      // A pass before the resume delay leaves them alone (their handshake could still be in flight).
      expect((await manageNodePool(env.deps(), instanceArn)).resumed).toBe(0);
      const second = await expectResumedInStep(instanceArn, eniId);
      expect(second.resumed).toBe(3);
    });

    it('keeps RELEASING when Unassign fails with 5xx, then unassigns on resume', async () => {
      env = await startPoolEnv();
      const { instanceArn, eniId } = await withExcess(env);
      env.sim.admin.failNext({ action: 'UnassignPrivateIpAddresses', code: 'InternalError', count: 2 });

      const first = await manageNodePool(env.deps(), instanceArn);

      expect(first.pendingRelease).toHaveLength(3);
      const s = await eniState(env, instanceArn, eniId);
      expect(s.inEc2).toHaveLength(9); // nothing happened in EC2
      expect(s.byState('RELEASING')).toHaveLength(3);
      expect(await invariantViolations(env)).toBe('');

      const second = await expectResumedInStep(instanceArn, eniId);
      expect(second.resumed).toBe(3);
      expect((await eniState(env, instanceArn, eniId)).inEc2).toHaveLength(6);
    });

    it('retries the delete later when it fails after the Unassign', async () => {
      env = await startPoolEnv();
      const { instanceArn, eniId } = await withExcess(env);

      const first = await manageNodePool(env.deps({ store: failing(env.store, 'deleteReleasing', 3) }), instanceArn);

      expect(first.pendingRelease).toHaveLength(3);
      const s = await eniState(env, instanceArn, eniId);
      expect(s.inEc2).toHaveLength(6);
      expect(s.byState('RELEASING')).toHaveLength(3);
      expect(s.recorded).toEqual(s.inEc2); // the node item already forgot them: no launch re-leases them
      expect(await invariantViolations(env)).toBe('');

      await expectResumedInStep(instanceArn, eniId);
    });

    it('finishes on resume when the node item write fails after the Unassign', async () => {
      env = await startPoolEnv();
      const { instanceArn, eniId } = await withExcess(env);

      const first = await manageNodePool(env.deps({ store: failing(env.store, 'updateNode', 1) }), instanceArn);

      expect(first.pendingRelease).toHaveLength(3);
      const s = await eniState(env, instanceArn, eniId);
      expect(s.inEc2).toHaveLength(6);
      expect(s.recorded).toHaveLength(9);
      // The adoption step must not re-lease the recorded-but-unassigned addresses: their leases are RELEASING.
      const between = await manageNodePool(env.deps(), instanceArn);
      expect(between.adopted).toBe(0);
      expect(await invariantViolations(env)).toBe('');

      await expectResumedInStep(instanceArn, eniId);
    });

    it('rolls back the marks already made when the store fails between two marks', async () => {
      env = await startPoolEnv();
      const { instanceArn, eniId } = await withExcess(env);

      await expect(
        manageNodePool(env.deps({ store: failing(env.store, 'markReleasing', 1, 1) }), instanceArn),
      ).rejects.toThrow(StoreUnavailableError);

      const s = await eniState(env, instanceArn, eniId);
      expect(s.inEc2).toHaveLength(9);
      expect(s.byState('FREE')).toEqual(s.inEc2);
      expect(env.sim.admin.counts()['UnassignPrivateIpAddresses']).toBeUndefined();
      expect(await invariantViolations(env)).toBe('');
    });

    it('releases a delegated prefix only whole, and resumes a crash between its marks by rolling back', async () => {
      env = await startPoolEnv({
        config: { prefixDelegation: true, minLeases: 4, warmLowLeases: 3, warmHighLeases: 6 },
      });
      const { instanceArn, node } = await readyNode(env, { enis: [{ prefixCount: 3 }] });
      const eniId = node.enis[0]!.eniId!;
      env.clock.advance(RELEASE_DELAY_MS);

      // A pass that died after marking 5 of the 16 leases of one /28 (before its Unassign).
      const firstPrefix = (await env.store.listLeases(instanceArn))[0]!.prefix!;
      const victims = (await env.store.listLeases(instanceArn)).filter((l) => l.prefix === firstPrefix).slice(0, 5);
      for (const l of victims) await env.store.markReleasing(instanceArn, l.ip, env.clock.nowMs());
      env.clock.advance(RESUME_AFTER_MS);

      const report = await manageNodePool(env.deps(), instanceArn);

      // The half-marked /28 is rolled back (still assigned, so safe) and, just back to FREE, is not idle enough
      // to go; of the excess (48 spare − high 6 = 42) the two other whole /28s go.
      const [eni] = await env.ec2.describeNetworkInterfaces({ eniIds: [eniId] });
      expect(eni?.prefixes).toHaveLength(1);
      expect(report.released).toHaveLength(32);
      const leases = await env.store.listLeases(instanceArn);
      expect(leases).toHaveLength(16);
      expect(eni?.prefixes).toEqual([firstPrefix]);
      expect(leases.every((l) => l.prefix === firstPrefix && l.state === 'FREE')).toBe(true);
      expect(await invariantViolations(env)).toBe('');
    });
  });
});
