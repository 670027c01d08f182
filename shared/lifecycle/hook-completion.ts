import type { NodeRecord } from '../domain/node.js';
import { errorMessage, NodeNotFoundError, VersionConflictError } from '../errors.js';
import type { LeaseStore } from '../lease-store/port.js';
import type { Logger } from '../log.js';

/** Concurrent writers of the node item (the pool, a terminate) are rare right after a launch: a few re-reads do. */
const MAX_ATTEMPTS = 4;

/**
 * Records on the node item when this launch completed its lifecycle action, so `vpc-lease node` can tell how long
 * the hook held the instance. Best effort: the action is already completed, and failing the invocation now would
 * only re-run a finished launch, so a write that cannot land is logged, not thrown. `updatedAtMs` is left alone:
 * it dates the node's last phase or ENI change, which the reconciler's age checks read.
 */
export async function recordHookCompletion(
  store: LeaseStore,
  instanceArn: string,
  completedAtMs: number,
  log: Logger,
): Promise<NodeRecord | undefined> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      const node = await store.getNode(instanceArn);
      if (!node || node.hookCompletedAtMs !== undefined) return node;
      return await store.updateNode({ ...node, hookCompletedAtMs: completedAtMs }, node.version);
    } catch (err) {
      if (err instanceof NodeNotFoundError) return undefined;
      if (!(err instanceof VersionConflictError) || attempt >= MAX_ATTEMPTS) {
        log.warn('hook completion time not recorded on the node item', { error: errorMessage(err) });
        return undefined;
      }
    }
  }
}
