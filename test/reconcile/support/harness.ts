import { afterEach } from 'vitest';
import { DynamoLeasePartitions } from '../../../shared/reconcile/lease-partitions.js';
import type { PacedReconcileDeps } from '../../../shared/reconcile/paced.js';
import type { ReconcilerDeps } from '../../../shared/reconcile/reconciler.js';
import { type PoolEnv, type PoolEnvOptions, startPoolEnv } from '../../pool/support.js';
import { MemorySweepCursorStore } from '../../support/memory-sweep-cursor-store.js';

// The reconcile suites' one harness: a pool env (dynalite, the EC2 simulator) per test, and the deps on it.

/** The gap between the reconciler's two looks in these suites. */
export const MARK_AGE_MS = 60_000;

/** Returns a starter whose env is closed after each test, whether the test passed or not. */
export function poolEnvPerTest(): (options?: PoolEnvOptions) => Promise<PoolEnv> {
  let env: PoolEnv | undefined;
  afterEach(async () => {
    await env?.close();
    env = undefined;
  });
  return async (options) => {
    env = await startPoolEnv(options);
    return env;
  };
}

/** The reconciler as its Lambda wires it, on the env's store, EC2 and clock. */
export function reconcilerDeps(e: PoolEnv, extra: Partial<ReconcilerDeps> = {}): ReconcilerDeps {
  return {
    ec2: e.ec2,
    store: e.store,
    config: e.config,
    clock: e.clock,
    logger: e.logger,
    metrics: e.metrics,
    minMarkAgeMs: MARK_AGE_MS,
    ...extra,
  };
}

/** The paced reconciler: no drift grace, an in-memory cursor unless one is given, the census over dynalite. */
export function pacedDeps(e: PoolEnv, extra: Partial<PacedReconcileDeps> = {}): PacedReconcileDeps {
  return {
    ...reconcilerDeps(e),
    config: e.config,
    driftGraceMs: 0,
    cursor: new MemorySweepCursorStore(),
    leasePartitions: new DynamoLeasePartitions(e.api, e.tableName),
    ...extra,
  };
}
