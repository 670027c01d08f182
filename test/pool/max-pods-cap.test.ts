import { afterEach, describe, expect, it } from 'vitest';
import { manageNodePool } from '../../shared/pool/pool-manager.js';
import { claimOne, invariantViolations, type PoolEnv, readyNode, startPoolEnv } from './support.js';

let env: PoolEnv | undefined;

afterEach(async () => {
  await env?.close();
  env = undefined;
});

/** Leases the node holds (every state but RELEASING), as the pool counts them against the cap. */
async function held(e: PoolEnv, arn: string): Promise<number> {
  return (await e.store.listLeases(arn)).filter((l) => l.state !== 'RELEASING').length;
}

// c5.4xlarge has room for 7 pod ENIs × 29 addresses, far above both figures used here, so only the cap can
// stop the pool. The watermarks (low 30, high 40) ask for 35 more leases once 5 of 10 are claimed.
const config = { warmLowLeases: 30, warmHighLeases: 40, minLeases: 4, maxPods: 110 };

describe('Pool: never past max-pods', () => {
  it('stops at the figure the node item records although the watermarks and the configured cap ask for more', async () => {
    env = await startPoolEnv({ config });
    // Launched when the cap was 20: kubelet on this node admits 20 pods, whatever the cap says now.
    const { instanceArn } = await readyNode(env, { instanceType: 'c5.4xlarge', enis: [{ ipCount: 10 }], maxPods: 20 });
    for (let i = 0; i < 5; i++) await claimOne(env, instanceArn);

    const report = await manageNodePool(env.deps(), instanceArn);

    expect(report.needed).toBe(10); // min(35 wanted, 20 − 10 held)
    expect(report.leased).toHaveLength(10);
    expect(await held(env, instanceArn)).toBe(20);
    // A second pass still wants 30 − 15 claimable, and still has no room.
    const again = await manageNodePool(env.deps(), instanceArn);
    expect(again.needed).toBe(0);
    expect(await held(env, instanceArn)).toBe(20);
    expect(await invariantViolations(env)).toBe('');
  });

  it('releases down to a configured cap lowered below the recorded figure', async () => {
    env = await startPoolEnv({ config: { ...config, warmLowLeases: 0, warmHighLeases: 30, releaseDelayMs: 0 } });
    const { instanceArn } = await readyNode(env, { instanceType: 'c5.4xlarge', enis: [{ ipCount: 20 }], maxPods: 110 });
    env.config = { ...env.config, maxPods: 12 };

    const report = await manageNodePool(env.deps(), instanceArn);

    expect(report.excess).toBe(8);
    expect(await held(env, instanceArn)).toBe(12);
  });

  it('control: with a figure above the watermarks, the same pass leases what the watermarks ask', async () => {
    env = await startPoolEnv({ config });
    const { instanceArn } = await readyNode(env, { instanceType: 'c5.4xlarge', enis: [{ ipCount: 10 }], maxPods: 110 });
    for (let i = 0; i < 5; i++) await claimOne(env, instanceArn);

    const report = await manageNodePool(env.deps(), instanceArn);

    expect(report.needed).toBe(35);
    expect(await held(env, instanceArn)).toBeGreaterThan(20);
  });
});
