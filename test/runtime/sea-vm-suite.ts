import { join } from 'node:path';
import { buildSea } from '../../packaging/build.js';
import { type GuestSuite, guestCaseTests, type SuiteRun } from '../vm/suites.js';

/**
 * The single executable on real ipvlan (guest/sea-main.ts): installed by itself and run with Node masked, ADD
 * and DEL on real ipvlan. It shares the VM boot of test/vm/ipvlan-vm.test.ts.
 */
export const SEA_CASES = [
  'sea: node is masked in the namespace the executable runs in',
  'sea: installs itself and answers VERSION with no Node.js',
  'sea: ADD and DEL with real ipvlan L2 and no Node.js',
];

export const seaSuite: GuestSuite = {
  name: 'sea',
  entry: 'test/runtime/guest/sea-main.ts',
  timeoutS: 600,
  prepare: async (dir, policyFile) => [await buildSea(join(dir, 'bin'), { reuse: true }), policyFile],
};

export function seaTests(run: () => SuiteRun | undefined): void {
  guestCaseTests(SEA_CASES, run);
}
