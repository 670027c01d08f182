import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createEgressChain,
  egressRulesOf,
  installEgressRules,
  removeEgressRules,
} from '../../node/datapath/egress4.js';
import { PrivateHost } from './support/private-host.js';

const RUN = process.pid.toString(36);

/** The IPv4 egress chains of `ipv6` pods in a private host netns (iptables as root). */
describe('IPv4 egress chains (egress4.ts)', () => {
  let host: PrivateHost | undefined;
  beforeAll(() => {
    host = PrivateHost.enter(`vl9e-${RUN}`);
  });
  afterAll(() => host?.leave());

  it('keeps the rules of a pod when a concurrent first ADD creates the chains it also found missing', () => {
    installEgressRules('vlhtesta', '169.254.172.7');
    const before = egressRulesOf('169.254.172.7');
    expect(before.filter).toHaveLength(2);
    expect(before.nat).toHaveLength(1);

    // The racer's step: it looked before the first ADD made the chains, so it creates them again.
    createEgressChain('filter');
    createEgressChain('nat');

    expect(egressRulesOf('169.254.172.7')).toEqual(before);
    expect(removeEgressRules('169.254.172.7')).toBe('removed');
  });
});
