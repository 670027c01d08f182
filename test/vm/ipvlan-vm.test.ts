import { resolve } from 'node:path';
import { beforeAll, describe } from 'vitest';
import { seaSuite, seaTests } from '../runtime/sea-vm-suite.js';
import { missing } from '../support/capabilities.js';
import { ipvlanSuite, ipvlanTests } from './ipvlan-suite.js';
import { runGuestSuites, type SuiteRun } from './suites.js';

/**
 * One VM boot (real ipvlan) for the guest suites below, run one after the other, each in a fresh network
 * namespace (suites.ts); each guest case becomes a test here, so a guest failure reads like any other failing
 * test. A new guest suite joins by adding itself to SUITES and registering its tests below. The IPv6 suite has
 * its own boot (ipv6-vm.test.ts), so the two run on both cores instead of one file setting the suite's floor.
 */
const skipReason = missing('vm', 'root');
const SUITES = [ipvlanSuite, seaSuite];
let runs: Map<string, SuiteRun> | undefined;

describe.skipIf(skipReason !== undefined)('VM: guest suites in one boot', () => {
  beforeAll(
    async () => {
      const verbose = process.env['VPC_LEASE_VM_VERBOSE'] === '1';
      runs = await runGuestSuites(SUITES, resolve('.test-results/vm'), {
        ...(verbose ? { onLine: (line: string) => process.stderr.write(`vm: ${line}\n`) } : {}),
      });
    },
    SUITES.reduce((ms, s) => ms + s.timeoutS * 1000, 120_000),
  );

  describe('real ipvlan suite', () => ipvlanTests(() => runs?.get(ipvlanSuite.name)));
  describe('the single executable on real ipvlan, without Node.js', () => seaTests(() => runs?.get(seaSuite.name)));
});
