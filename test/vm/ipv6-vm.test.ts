import { resolve } from 'node:path';
import { beforeAll, describe } from 'vitest';
import { missing } from '../support/capabilities.js';
import { ipv6Suite, ipv6Tests } from './ipv6-suite.js';
import { runGuestSuites, type SuiteRun } from './suites.js';

/** The IPv6 guest suite in a VM of its own (real ipvlan), beside ipvlan-vm.test.ts's boot; see that file. */
const skipReason = missing('vm', 'root');
let runs: Map<string, SuiteRun> | undefined;

describe.skipIf(skipReason !== undefined)('VM: the IPv6 guest suite', () => {
  beforeAll(
    async () => {
      const verbose = process.env['VPC_LEASE_VM_VERBOSE'] === '1';
      runs = await runGuestSuites([ipv6Suite], resolve('.test-results/vm-ipv6'), {
        ...(verbose ? { onLine: (line: string) => process.stderr.write(`vm: ${line}\n`) } : {}),
      });
    },
    ipv6Suite.timeoutS * 1000 + 120_000,
  );

  describe('IPv6 pods on real ipvlan', () => ipv6Tests(() => runs?.get(ipv6Suite.name)));
});
