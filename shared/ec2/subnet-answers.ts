import type { Clock } from '../clock.js';
import type { Ec2Port, Ec2Subnet, SubnetQuery } from './port.js';

/**
 * The EC2 port with each DescribeSubnets answer shared for `ttlMs` within a container: launches arriving
 * together plan against the same candidate subnets, and a mass scale-out does not spend the Describe bucket on
 * one DescribeSubnets per launch (`npm run bench -- scale --large`). Free-address counts may be that much older; a create refused
 * for room moves the ENI to the next candidate subnet (pod-eni-steps.ts), as after any race with another
 * creator. A failed answer (throttled, deferred by the rate budget) is not kept.
 */
export function withSubnetAnswersShared(inner: Ec2Port, clock: Clock, ttlMs: number): Ec2Port {
  if (ttlMs <= 0) return inner;
  const answers = new Map<string, { atMs: number; subnets: Promise<Ec2Subnet[]> }>();
  const describeSubnets = (query: SubnetQuery): Promise<Ec2Subnet[]> => {
    const key = JSON.stringify(query);
    const nowMs = clock.nowMs();
    let hit = answers.get(key);
    if (!hit || nowMs - hit.atMs >= ttlMs) {
      const subnets = inner.describeSubnets(query);
      hit = { atMs: nowMs, subnets };
      answers.set(key, hit);
      const mine = hit;
      subnets.catch(() => {
        if (answers.get(key) === mine) answers.delete(key);
      });
    }
    // Copies: a caller that sorts or edits its answer must not change the next caller's.
    return hit.subnets.then((list) => list.map((s) => ({ ...s })));
  };
  return new Proxy(inner, {
    get(target, property) {
      if (property === 'describeSubnets') return describeSubnets;
      const value = Reflect.get(target, property, target) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}
