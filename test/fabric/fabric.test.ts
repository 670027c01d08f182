import { beforeAll, describe, expect, it } from 'vitest';
import { missing } from '../support/capabilities.js';
import { configNamed, formatShare, hasV4, hasV6, shareOf } from './configs.js';
import {
  ALL_CONFIGS,
  chooseConfigs,
  controlShares,
  type FabricRun,
  formatControls,
  formatMatrix,
  formatRun,
  runFabric,
  SEEDS_FOR_EVERY_CONFIG,
  SEEDS_FOR_EVERY_CONTROL,
  unsupportedReason,
} from './harness.js';
import { RETRY_BUDGET } from './results.js';

/**
 * In `npm test` it runs one of the eight configurations, picked by a seed (harness.ts's ROTATION: seed mod 8, so
 * any SEEDS_FOR_EVERY_CONFIG consecutive seeds run all eight), printed first so `VPC_LEASE_FABRIC_SEED=<seed>`
 * repeats the run. VPC_LEASE_FABRIC_CONFIGS=all (or a list) runs those instead, and `npm run fabric` runs all
 * and prints the table.
 *
 * The VPC fabric matrix in one VM boot (real ipvlan, two nodes, kube-proxy's rules, the built plugin installed by
 * the installer). A FAIL fails the suite unless harness.ts's UNSUPPORTED documents it, and so does a run that
 * needed more than RETRY_BUDGET retried plugin calls (code 11, or a failed DEL). Before the matrix, the seed's
 * share of the configuration's controls (controlShares; every control of every configuration within
 * SEEDS_FOR_EVERY_CONTROL seeds) runs with its defence removed (guest/defences.ts): each must fail for the missing
 * defence's reason, and then pass in the matrix with the defence restored.
 */
const skipReason = missing('vm', 'root');
const { configs, seed } = chooseConfigs(process.env);
const controlled = controlShares({ configs, ...(seed === undefined ? {} : { seed }) });
const chosen = [
  `${configs.join(', ')}${seed === undefined ? '' : ` (VPC_LEASE_FABRIC_SEED=${seed}; every configuration runs within ${SEEDS_FOR_EVERY_CONFIG} consecutive seeds)`}`,
  `controls without their defence: ${controlled.map(formatShare).join(', ') || 'none'}${seed === undefined ? '' : ` (every control of every configuration within ${SEEDS_FOR_EVERY_CONTROL} consecutive seeds)`}`,
].join('; ');
let run: FabricRun | undefined;

/** The defences whose controls a configuration runs (guest/defences.ts), by what their rows say, in the guest's order. */
function defencesOf(config: string): RegExp[] {
  const { family } = configNamed(config);
  const v4 = [/source\/destination check \(SRC-/, /delivery only to the owning ENI:/, /IMDS unreachable in .*-client/];
  const v6 = [
    /source\/destination check \(SRC6-/,
    /delivery only to the owning ENI \(IPv6\)/,
    /IMDS \(IPv6\) unreachable in .*-client/,
    /IMDS \(IPv6\) unreachable in .*-noveth/,
    /egress-only internet gateway/,
  ];
  return [
    ...(hasV4(family) ? [...v4, /IMDS unreachable in .*-noveth/] : []),
    ...(hasV6(family) ? v6 : []),
    ...(family === 'ipv6' ? [/IMDS unreachable over .*IPv4 egress/] : []),
  ];
}

/** The controls' and IMDS cells every configuration keeps in its matrix: for each IP version of its pods. */
function keptCellsOf(config: string): { name: RegExp; v6: boolean }[] {
  const { family } = configNamed(config);
  const names = [
    /unassigned address is dropped/,
    /no ENI owns/,
    /IMDS is blocked \(with host veth\)/,
    /IMDS is blocked \(no host veth\)/,
    /IMDS block lifted is seen/,
  ];
  return [
    ...(hasV4(family) ? names.map((name) => ({ name, v6: false })) : []),
    ...(hasV6(family) ? [...names, /egress-only internet gateway/].map((name) => ({ name, v6: true })) : []),
  ];
}

describe.skipIf(skipReason !== undefined)('VPC fabric in the VM', () => {
  beforeAll(async () => {
    process.stderr.write(`fabric configurations: ${chosen}\n`);
    run = await runFabric({
      verbose: process.env['VPC_LEASE_VM_VERBOSE'] === '1',
      only: configs.join(','),
      controls: controlled.map(formatShare).join(','),
    });
    process.stderr.write(`${formatMatrix(run.results)}\n${formatRun(run)}\n${formatControls(run.results)}\n`);
  }, 2_500_000);

  it('ran every configuration', () => {
    const ran = new Set(run?.results.map((r) => r.config));
    expect([...ran], run?.consoleTail).toEqual(['install', ...ALL_CONFIGS.filter((c) => configs.includes(c))]);
  });

  it('has no FAIL outside the documented ones', () => {
    const unexpected = (run?.results ?? []).filter((r) => !r.ok && !unsupportedReason(r));
    expect(unexpected.map((r) => `${r.config} | ${r.cell}: ${r.detail}`)).toEqual([]);
  });

  it(`needed at most ${RETRY_BUDGET} retried plugin calls (code 11, or a failed DEL)`, () => {
    const retries = (run?.retries ?? []).map((r) => `${r.node} ${r.command} ${r.containerId}: ${r.msg}`);
    expect(retries.length, retries.join('\n')).toBeLessThanOrEqual(RETRY_BUDGET);
  });

  it("sees each control of the run's share fail with its defence removed and pass with it back", () => {
    // Every run lifts some: each configuration's share is at least one control (controlShares).
    expect(controlled.length, 'no control ran without its defence').toBeGreaterThan(0);
    for (const share of controlled) {
      const rows = (run?.results ?? []).filter((r) => r.config === share.config && r.cell.startsWith('control '));
      const lifted = shareOf(defencesOf(share.config), share);
      for (const defence of lifted)
        for (const phase of ['without', 'with'])
          expect(
            rows.find((r) => r.cell.startsWith(`control ${phase} `) && defence.test(r.cell))?.ok,
            `${formatShare(share)} ${phase} ${defence}`,
          ).toBe(true);
      // Only the share: a control outside it ran with its defence in place, in the matrix.
      expect(rows.length, rows.map((r) => r.cell).join('\n')).toBe(2 * lifted.length);
    }
  });

  it('keeps the controls and the IMDS cells in every configuration', () => {
    for (const config of configs) {
      // The matrix's own rows, not the controls' runs without their defence, which name the same cells.
      const cells = (run?.results ?? []).filter((r) => r.config === config && !r.cell.startsWith('control '));
      for (const { name, v6 } of keptCellsOf(config))
        expect(
          cells.find((c) => name.test(c.cell) && c.cell.includes('(IPv6)') === v6)?.ok,
          `${config} ${name}${v6 ? ' (IPv6)' : ''}`,
        ).toBe(true);
    }
  });
});
