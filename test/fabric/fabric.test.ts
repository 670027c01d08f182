import { beforeAll, describe, expect, it } from 'vitest';
import { missing } from '../support/capabilities.js';
import {
  ALL_CONFIGS,
  chooseConfigs,
  type FabricRun,
  formatMatrix,
  formatRun,
  runFabric,
  unsupportedReason,
} from './harness.js';
import { RETRY_BUDGET } from './results.js';

/**
 * In `npm test` it runs two of the six configurations, a pair picked by a seed (harness.ts's ROTATION: the three
 * pairs cover all six), printed first so `VPC_LEASE_FABRIC_SEED=<seed>` repeats the run; two keep its wall time
 * near five minutes. VPC_LEASE_FABRIC_CONFIGS=all (or a list) runs those instead, and `npm run fabric` runs all
 * six and prints the table.
 *
 * The VPC fabric matrix in one VM boot (real ipvlan, two nodes, kube-proxy's rules, the built plugin installed by
 * the installer). A FAIL fails the suite unless harness.ts's UNSUPPORTED documents it, and so does a run that
 * needed more than RETRY_BUDGET code-11 retries.
 */
const skipReason = missing('vm', 'root');
const { configs, seed } = chooseConfigs(process.env);
const chosen = `${configs.join(', ')}${seed === undefined ? '' : ` (VPC_LEASE_FABRIC_SEED=${seed})`}`;
let run: FabricRun | undefined;

describe.skipIf(skipReason !== undefined)('VPC fabric in the VM', () => {
  beforeAll(async () => {
    process.stderr.write(`fabric configurations: ${chosen}\n`);
    run = await runFabric({ verbose: process.env['VPC_LEASE_VM_VERBOSE'] === '1', only: configs.join(',') });
    process.stderr.write(`${formatMatrix(run.results)}\n${formatRun(run)}\n`);
  }, 2_500_000);

  it('ran every configuration', () => {
    const ran = new Set(run?.results.map((r) => r.config));
    expect([...ran], run?.consoleTail).toEqual(['install', ...ALL_CONFIGS.filter((c) => configs.includes(c))]);
  });

  it('has no FAIL outside the documented ones', () => {
    const unexpected = (run?.results ?? []).filter((r) => !r.ok && !unsupportedReason(r));
    expect(unexpected.map((r) => `${r.config} | ${r.cell}: ${r.detail}`)).toEqual([]);
  });

  it(`needed at most ${RETRY_BUDGET} code-11 retries of plugin calls`, () => {
    const retries = (run?.retries ?? []).map((r) => `${r.node} ${r.command} ${r.containerId}: ${r.msg}`);
    expect(retries.length, retries.join('\n')).toBeLessThanOrEqual(RETRY_BUDGET);
  });

  it('keeps the controls and the IMDS cells in every configuration', () => {
    for (const config of configs) {
      const cells = (run?.results ?? []).filter((r) => r.config === config);
      for (const name of [
        /unassigned address is dropped/,
        /no ENI owns/,
        /IMDS is blocked \(with/,
        /IMDS is blocked \(no/,
        /IMDS block lifted is seen/,
      ])
        expect(cells.find((c) => name.test(c.cell))?.ok, `${config} ${name}`).toBe(true);
    }
  });
});
