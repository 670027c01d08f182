import { afterEach, describe, expect, it } from 'vitest';
import { instanceArn } from '../../shared/domain/arn.js';
import { addPoolDue, loadPoolDue, POOL_DUE_MAX_NODES } from '../../shared/pool/pool-due.js';
import { sweepPools } from '../../shared/pool/sweep.js';
import { DynamoSweepCursorStore } from '../../shared/schedule/cursor.js';
import { ACCOUNT, type PoolEnv, REGION, readyNode, startPoolEnv } from '../pool/support.js';

let env: PoolEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

const HOUR_MS = 3_600_000;
/** What one full pass costs on the manual clock: a run fits ~30 before its deadline, as a Lambda's 60 s would. */
const PASS_MS = 1_000;
const RUN_MS = 30_000;

/**
 * The census's due list at its cap (every node a census found wanting a pass, say after a lost stream batch):
 * the sweep passes it at each cycle's start. It must stop at the run's deadline and drop what it passed; a run
 * the Lambda's timeout ends drops nothing, and the next starts the same list again, so the sweep never gets
 * past its first page for any node.
 */
describe('Security: the pool-due list at its cap', () => {
  it('the sweep passes what fits before its deadline, drops those, and the next cycle goes on from there', async () => {
    const e = await startPoolEnv();
    env = e;
    await readyNode(e);
    const cursor = new DynamoSweepCursorStore(e.api, e.tableName);
    const dueArns = Array.from({ length: POOL_DUE_MAX_NODES }, (_, i) =>
      instanceArn(REGION, ACCOUNT, `i-${i.toString(16).padStart(17, '0')}`, 'aws'),
    );
    await addPoolDue(cursor, e.logger, dueArns);
    expect((await loadPoolDue(cursor)).length).toBe(POOL_DUE_MAX_NODES);
    const passedAt: { arn: string; atMs: number }[] = [];
    const listLeases = e.store.listLeases.bind(e.store);
    e.store.listLeases = async (arn, filter) => {
      passedAt.push({ arn, atMs: e.clock.nowMs() });
      e.clock.advance(PASS_MS);
      return listLeases(arn, filter);
    };
    const deps = e.deps({ sweepCursor: cursor });

    const firstDeadlineMs = e.clock.nowMs() + RUN_MS;
    const first = await sweepPools(deps, { deadlineMs: firstDeadlineMs });
    const firstPassed = passedAt.splice(0).filter((p) => dueArns.includes(p.arn));

    expect(firstPassed.filter((p) => p.atMs >= firstDeadlineMs)).toEqual([]);
    expect(firstPassed.length).toBeGreaterThan(0);
    expect(first.due).toBe(firstPassed.length);
    expect(await loadPoolDue(cursor)).toEqual(dueArns.slice(firstPassed.length));

    e.clock.advance(HOUR_MS);
    const secondDeadlineMs = e.clock.nowMs() + RUN_MS;
    await sweepPools(deps, { deadlineMs: secondDeadlineMs });
    const secondPassed = passedAt.splice(0).filter((p) => dueArns.includes(p.arn));
    expect(secondPassed.filter((p) => p.atMs >= secondDeadlineMs)).toEqual([]);
    expect(secondPassed[0]?.arn).toBe(dueArns[firstPassed.length]);
  }, 400_000);
});
