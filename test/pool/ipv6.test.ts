import { afterEach, describe, expect, it } from 'vitest';
import type { LifecycleResult } from '../../shared/autoscaling/port.js';
import { instanceArn } from '../../shared/domain/arn.js';
import { ipFamilyOf } from '../../shared/ipv6.js';
import { claimPodLeases } from '../../shared/lease-store/claim-pair.js';
import { LAUNCH_DETAIL_TYPE } from '../../shared/lifecycle/events.js';
import { manageNodePool } from '../../shared/pool/pool-manager.js';
import { drive, lifecycleBody } from './lifecycle-drive.js';
import { ACCOUNT, invariantViolations, type PoolEnv, REGION, startPoolEnv } from './support.js';

/**
 * The pool on ipv6 and dual nodes the launch built: IPv6 leases inside the node item's /80 are the launch's and
 * trusted, never reported as untrusted nor counted against the IPv4 watermarks, and never released.
 */
let env: PoolEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

const MUTATING = [
  'AssignPrivateIpAddresses',
  'UnassignPrivateIpAddresses',
  'AssignIpv6Addresses',
  'UnassignIpv6Addresses',
];

async function launchedNode(e: PoolEnv): Promise<string> {
  const instanceId = e.sim.api.launchInstance({ instanceType: 'm5.large', subnetId: e.subnetId }).instanceId;
  const results: LifecycleResult[] = [];
  await drive(e, lifecycleBody(LAUNCH_DETAIL_TYPE, 'autoscaling:EC2_INSTANCE_LAUNCHING', instanceId), results);
  expect(results).toEqual(['CONTINUE']);
  return instanceArn(REGION, ACCOUNT, instanceId, 'aws');
}

describe('Pool on IPv6 leases', () => {
  it('ipv6: the /80 leases are trusted and left alone — no rejection, no Assign or Unassign, nothing released', async () => {
    env = await startPoolEnv({ config: { ipFamily: 'ipv6', maxPods: 20 } });
    const arn = await launchedNode(env);
    const before = (await env.store.listLeases(arn)).map((l) => l.ip).sort();
    expect(before).toHaveLength(20);
    const calls: string[] = [];
    env.sim.api.onCall((c) => calls.push(c.action));
    for (let pass = 0; pass < 2; pass++) await manageNodePool(env.deps(), arn);
    expect(env.logs.filter((l) => l.includes('untrusted lease rejected'))).toEqual([]);
    expect(calls.filter((a) => MUTATING.includes(a))).toEqual([]);
    expect((await env.store.listLeases(arn)).map((l) => l.ip).sort()).toEqual(before);
    expect(await invariantViolations(env)).toBe('');
  });

  it('dual: the watermarks count IPv4, a top-up Assigns IPv4 only, and every IPv4 lease gets its IPv6 partner', async () => {
    env = await startPoolEnv({ config: { ipFamily: 'dual', minLeases: 4, warmLowLeases: 3, warmHighLeases: 6 } });
    const arn = await launchedNode(env);
    const calls: string[] = [];
    env.sim.api.onCall((c) => calls.push(c.action));
    for (let n = 0; n < 5; n++) {
      const holder = { containerId: `dual-${n}`, ifName: 'eth0', netns: `/var/run/netns/dual-${n}` };
      await claimPodLeases(env.store, arn, holder, env.clock.nowMs(), 'dual');
    }
    for (let pass = 0; pass < 2; pass++) await manageNodePool(env.deps(), arn);
    expect(env.logs.filter((l) => l.includes('untrusted lease rejected'))).toEqual([]);
    expect(calls).toContain('AssignPrivateIpAddresses');
    expect(calls.filter((a) => a.includes('Ipv6'))).toEqual([]);
    const leases = await env.store.listLeases(arn);
    const v4 = leases.filter((l) => ipFamilyOf(l.ip) === 'ipv4');
    const v6 = leases.filter((l) => ipFamilyOf(l.ip) === 'ipv6');
    expect(v4.length).toBeGreaterThan(6);
    expect(v6.length).toBe(v4.length);
    for (const eniId of new Set(v4.map((l) => l.eniId)))
      expect(v6.filter((l) => l.eniId === eniId).length).toBe(v4.filter((l) => l.eniId === eniId).length);
    expect(await invariantViolations(env)).toBe('');
  });
});
