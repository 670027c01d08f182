import { ipv6Cases } from './guest/ipv6-cases.js';
import { type GuestSuite, guestCaseTests, type SuiteRun, sharedCni } from './suites.js';

/**
 * IPv6 pods on real ipvlan (guest/ipv6-cases.ts): L2/L3/L3S with the host veth, IPv4 egress, the IMDS blocks with
 * their controls, and dual in L3S. The expected cases come from the same list the guest runs.
 */
export const ipv6Suite: GuestSuite = {
  name: 'ipv6',
  entry: 'test/vm/guest/ipv6-main.ts',
  timeoutS: 900,
  prepare: async (dir, policyFile) => [await sharedCni(dir), policyFile],
};

export function ipv6Tests(run: () => SuiteRun | undefined): void {
  const expected = ipv6Cases(
    async () => undefined,
    () => {
      throw new Error('host side: never run');
    },
  ).map((c) => c.name);
  guestCaseTests(expected, run);
}
