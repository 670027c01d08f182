import { NoFreeLeaseError } from '../../shared/errors.js';
import type { LeaseStore } from '../../shared/lease-store/port.js';
import { countDuplicates, type Holding } from '../bench/holdings.js';

export interface KubeletReport {
  readonly pods: number;
  readonly duplicates: number;
  readonly failures: Readonly<Record<string, number>>;
  /** Leases still CLAIMED after every loop ran DEL: a lost lease if not zero. */
  readonly leftClaimed: number;
}

/**
 * `loops` kubelets on one node, each ADD → DEL over and over for `durationMs`, issuing exactly the plugin's
 * store calls (claim without the existing-holder lookup, release by address). NoFreeLease is a legitimate
 * answer when 64 pods share a smaller pool; a duplicate address never is.
 */
export async function runKubeletLoops(
  store: LeaseStore,
  instanceArn: string,
  loops: number,
  durationMs: number,
): Promise<KubeletReport> {
  const deadline = performance.now() + durationMs;
  const holdings: Holding[] = [];
  const failures = new Map<string, number>();
  const failedAdds: { containerId: string; ifName: string; netns: string }[] = [];
  await Promise.all(
    Array.from({ length: loops }, async (_, index) => {
      for (let i = 0; performance.now() < deadline; i++) {
        const holder = { containerId: `k-${index}-${i}`, ifName: 'eth0', netns: `/var/run/netns/k${index}` };
        let ip: string | undefined;
        let maybeWritten = false;
        try {
          ip = (await store.claim(instanceArn, holder, Date.now(), { checkExisting: false })).ip;
          const from = performance.now();
          await new Promise((resolve) => setImmediate(resolve));
          holdings.push({ ip, pod: holder.containerId, fromMs: from, untilMs: performance.now() });
        } catch (err) {
          const name = (err as Error).name;
          failures.set(name, (failures.get(name) ?? 0) + 1);
          maybeWritten = !(err instanceof NoFreeLeaseError);
          // Back off like a kubelet retrying a failed sandbox, so a full pool is not a busy loop.
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        // DEL must not be lost: retried until the store answers (throttling may refuse it a few times). After a
        // failed ADD the runtime calls DEL too (CNI spec): a claim that timed out on the client may have been
        // written, and only the holder lookup (no ip) can find it.
        if (ip === undefined && !maybeWritten) continue;
        await del(() => store.release(instanceArn, holder, Date.now(), 0, ip));
        if (ip === undefined) failedAdds.push(holder);
      }
    }),
  );
  // A timed-out claim can still land after its DEL looked the holder up: the runtime's CNI GC (and kubelet's
  // repeated DEL for a sandbox it never saw start) releases it; one more DEL per failed ADD models that.
  for (const holder of failedAdds) await del(() => store.release(instanceArn, holder, Date.now(), 0));
  const leftClaimed = (await store.listLeases(instanceArn, { state: 'CLAIMED' })).length;
  return {
    pods: holdings.length,
    duplicates: countDuplicates(holdings),
    failures: Object.fromEntries(failures),
    leftClaimed,
  };
}

async function del(release: () => Promise<unknown>): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await release();
      return;
    } catch (err) {
      if (attempt >= 20) throw err;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}
