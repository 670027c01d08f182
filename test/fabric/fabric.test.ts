import { beforeAll, describe, expect, it } from 'vitest';
import { missing } from '../support/capabilities.js';
import { type FabricRun, formatMatrix, runFabric, unsupportedReason } from './harness.js';

/**
 * In `npm test` it runs two of the six configurations — L2 with pod ENIs in the boot subnet (the seed's case)
 * and L3S in a pod subnet — to keep its wall time near five minutes; VPC_LEASE_FABRIC_CONFIGS=all (or a list)
 * runs more, and `npm run fabric` runs all six and prints the table.
 *
 * The VPC fabric matrix in one VM boot (real ipvlan, two nodes, kube-proxy's rules, the built plugin installed by
 * the installer). A FAIL fails the suite unless harness.ts's UNSUPPORTED documents it.
 */
const skipReason = missing('vm', 'root');
const ALL = ['l2/boot', 'l2/pod', 'l3/boot', 'l3/pod', 'l3s/boot', 'l3s/pod'];
const wanted = process.env['VPC_LEASE_FABRIC_CONFIGS'] ?? 'l2/boot,l3s/pod';
const configs = wanted === 'all' ? ALL : wanted.split(',');
let run: FabricRun | undefined;

describe.skipIf(skipReason !== undefined)('VPC fabric in the VM', () => {
  beforeAll(async () => {
    run = await runFabric({ verbose: process.env['VPC_LEASE_VM_VERBOSE'] === '1', only: configs.join(',') });
    process.stderr.write(`${formatMatrix(run.results)}\nfabric wall time: ${Math.round(run.wallMs / 1000)} s\n`);
  }, 2_500_000);

  it('ran every configuration', () => {
    const ran = new Set(run?.results.map((r) => r.config));
    expect([...ran], run?.consoleTail).toEqual(['install', ...ALL.filter((c) => configs.includes(c))]);
  });

  it('has no FAIL outside the documented ones', () => {
    const unexpected = (run?.results ?? []).filter((r) => !r.ok && !unsupportedReason(r));
    expect(unexpected.map((r) => `${r.config} | ${r.cell}: ${r.detail}`)).toEqual([]);
  });

  it('keeps the negative controls and the IMDS cells in every configuration', () => {
    for (const config of configs) {
      const cells = (run?.results ?? []).filter((r) => r.config === config);
      for (const name of [
        /unassigned address is dropped/,
        /no ENI owns/,
        /IMDS is blocked \(with/,
        /IMDS is blocked \(no/,
      ])
        expect(cells.find((c) => name.test(c.cell))?.ok, `${config} ${name}`).toBe(true);
    }
  });
});
