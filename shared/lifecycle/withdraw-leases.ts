import type { NodePhase } from '../domain/node.js';
import type { LeaseStore } from '../lease-store/port.js';

/**
 * After writing leases, checks that the node is still in one of `phases`. A terminate that ran between the
 * caller's node read and its lease put has already removed the partition: the leases just written would
 * outlive the node, so they are taken out again through the release handshake's two conditional writes
 * (claimed meanwhile, or gone with the partition: the terminate path or the reconciler owns them).
 * Returns whether the node is still there in one of `phases`.
 */
export async function withdrawLeasesIfNodeLeft(
  store: LeaseStore,
  nowMs: number,
  instanceArn: string,
  ips: readonly string[],
  phases: ReadonlySet<NodePhase>,
): Promise<boolean> {
  const current = await store.getNode(instanceArn);
  if (current && phases.has(current.phase)) return true;
  for (const ip of ips) {
    try {
      await store.markReleasing(instanceArn, ip, nowMs);
      await store.deleteReleasing(instanceArn, ip);
    } catch {
      // Claimed, or gone with the partition.
    }
  }
  return false;
}
