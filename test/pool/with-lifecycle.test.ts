import { afterEach, describe, expect, it } from 'vitest';
import type { LifecycleResult } from '../../shared/autoscaling/port.js';
import { instanceArn } from '../../shared/domain/arn.js';
import { ENI_TAGS } from '../../shared/ec2/tags.js';
import { LAUNCH_DETAIL_TYPE, TERMINATE_DETAIL_TYPE } from '../../shared/lifecycle/events.js';
import { manageNodePool } from '../../shared/pool/pool-manager.js';
import { reconcile } from '../../shared/reconcile/reconciler.js';
import { drive, lifecycleBody } from './lifecycle-drive.js';
import { ACCOUNT, claimOne, invariantViolations, type PoolEnv, REGION, startPoolEnv } from './support.js';

/**
 * The pool-manager and the reconciler on nodes the lifecycle Lambda's own executor built and tears down (its
 * record handler, over the same EC2 simulator and dynalite): the node item and lease formats they read are
 * the ones a launch really writes.
 */
let env: PoolEnv | undefined;

afterEach(async () => {
  await env?.close();
  env = undefined;
});

describe('Pool and reconciler on lifecycle-built nodes', () => {
  it('tops up, adds an ENI, releases excess, and leaves nothing after terminate and reconcile', async () => {
    env = await startPoolEnv({ config: { minLeases: 4, warmLowLeases: 3, warmHighLeases: 6 } });
    const instanceId = env.sim.api.launchInstance({ instanceType: 'm5.large', subnetId: env.subnetId }).instanceId;
    const arn = instanceArn(REGION, ACCOUNT, instanceId, 'aws');
    const results: LifecycleResult[] = [];
    await drive(env, lifecycleBody(LAUNCH_DETAIL_TYPE, 'autoscaling:EC2_INSTANCE_LAUNCHING', instanceId), results);
    expect(results).toEqual(['CONTINUE']);
    expect((await env.store.getNode(arn))?.phase).toBe('READY');
    const launched = (await env.store.listLeases(arn)).length; // the launch fills up to the high watermark
    expect(launched).toBe(6);

    // Pods arrive faster than the first ENI can hold: Assign top-ups, then a second ENI.
    const pods: { containerId: string; ip: string }[] = [];
    for (let i = 0; i < 12; i++) {
      pods.push(await claimOne(env, arn));
      await manageNodePool(env.deps(), arn);
      expect(await env.store.countClaimable(arn, env.clock.nowMs())).toBeGreaterThanOrEqual(env.config.warmLowLeases);
    }
    const node = (await env.store.getNode(arn))!;
    expect(node.enis.map((e) => [e.deviceIndex, e.step])).toEqual([
      [1, 'LEASED'],
      [2, 'LEASED'],
    ]);
    expect(await invariantViolations(env)).toBe('');

    // The pods go away; once their cooldown and the release delay pass, the excess returns to EC2.
    for (const pod of pods)
      await env.store.release(
        arn,
        { containerId: pod.containerId, ifName: 'eth0' },
        env.clock.nowMs(),
        env.config.reuseWaitMs,
        pod.ip,
      );
    env.clock.advance(env.config.reuseWaitMs + env.config.releaseDelayMs);
    const report = await manageNodePool(env.deps(), arn);
    expect(report.released.length).toBeGreaterThan(0);
    const leases = await env.store.listLeases(arn);
    expect(leases.filter((l) => l.state !== 'RELEASING')).toHaveLength(env.config.warmHighLeases);
    expect(await invariantViolations(env)).toBe('');

    // Terminate: the lifecycle drains the node; the reconciler finds nothing leaked, later removes what is left.
    env.sim.api.terminateInstance(instanceId);
    await drive(env, lifecycleBody(TERMINATE_DETAIL_TYPE, 'autoscaling:EC2_INSTANCE_TERMINATING', instanceId), results);
    await new Promise((resolve) => setTimeout(resolve, 20));
    env.clock.advance(env.config.eniMinAgeForGcMs);
    const reconcileDeps = {
      ec2: env.ec2,
      store: env.store,
      config: env.config,
      clock: env.clock,
      logger: env.logger,
      metrics: env.metrics,
    };
    await reconcile(reconcileDeps);
    env.clock.advance(120_000);
    await reconcile(reconcileDeps);
    expect(await env.store.listLeases(arn)).toEqual([]);
    const left = await env.ec2.describeNetworkInterfaces({ tags: { [ENI_TAGS.instance]: instanceId } });
    expect(left).toEqual([]);
    expect(await invariantViolations(env)).toBe('');
  });
});
