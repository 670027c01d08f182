/**
 * Host side of the fabric suite: bundles the guest, builds the plugin the way `npm run build` does, boots one VM
 * for every cell, and formats the matrix. Used by `npm run fabric` (prints the table) and by fabric.test.ts.
 */
import { randomInt } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { buildCni } from '../../packaging/build.js';
import { bundleGuest, runInVm, writeNodePolicy } from '../vm/vm.js';
import { allControls, CONFIGS, type ControlShare, configNamed, controlCount } from './configs.js';
import { type CellResult, type FabricResults, type PluginRetry, RETRY_BUDGET } from './results.js';

export type { CellResult, PluginRetry };

/**
 * Cells that cannot work in some configuration, with the reason (README and report). A FAIL in any other cell
 * fails the suite. A listed cell is still run and printed, pass or fail. None today: every cell works in every
 * configuration.
 */
export const UNSUPPORTED: readonly { readonly config: RegExp; readonly cell: RegExp; readonly why: string }[] = [];

/**
 * Every configuration, in the order the guest runs them: ipvlan mode × where the pod ENIs are for IPv4 pods, then
 * the `ipv6` and `dual` pods' two (configs.ts).
 */
export const ALL_CONFIGS: readonly string[] = CONFIGS.map((c) => c.name);

/**
 * `npm test`'s rotation: one configuration per run, the one its seed picks (seed mod 8), so eight consecutive seeds
 * run all eight. A configuration costs a run what the rest of the fabric costs; two per run kept the fabric the
 * longest file of `npm test`.
 */
export const ROTATION: readonly string[] = ALL_CONFIGS;

/** Consecutive seeds that run every configuration (rotation.test.ts proves it from any start). */
export const SEEDS_FOR_EVERY_CONFIG = ROTATION.length;

/**
 * The configurations a run asks for: a list or `all` (VPC_LEASE_FABRIC_CONFIGS), else the one of the seed
 * (VPC_LEASE_FABRIC_SEED, else a random one, which the caller prints so the run can be repeated).
 */
export function chooseConfigs(env: NodeJS.ProcessEnv): { configs: string[]; seed?: number } {
  const list = env['VPC_LEASE_FABRIC_CONFIGS'];
  if (list) {
    const configs = list === 'all' ? [...ALL_CONFIGS] : list.split(',');
    const unknown = configs.filter((c) => !ALL_CONFIGS.includes(c));
    if (unknown.length > 0) throw new Error(`VPC_LEASE_FABRIC_CONFIGS: unknown ${unknown.join(', ')}`);
    return { configs };
  }
  const given = env['VPC_LEASE_FABRIC_SEED'];
  if (given !== undefined && !/^\d{1,9}$/.test(given))
    throw new Error(`VPC_LEASE_FABRIC_SEED must be a whole number, not ${JSON.stringify(given)}`);
  const seed = given === undefined ? randomInt(1_000_000_000) : Number(given);
  return { configs: [ROTATION[seed % ROTATION.length]!], seed };
}

/**
 * Controls a run lifts at most: each runs alone with its defence lifted, 2-20 s of the emulated guest, mostly
 * waiting out the echoes that must not come back. A configuration's are cut into ceil(count / CONTROLS_PER_RUN)
 * shares (configs.ts, shareOf), and each seed runs one share of its configuration's, the next share each cycle of
 * the rotation. All nine of dual/l2's took 99 s, a third of its run, when every other seed lifted all of a
 * configuration's; a share of three takes 27-43 s.
 */
export const CONTROLS_PER_RUN = 3;

/** How many shares a configuration's controls are cut into. */
export const sharesOf = (config: string): number =>
  Math.ceil(controlCount(configNamed(config).family) / CONTROLS_PER_RUN);

/**
 * Consecutive seeds that run every control of every configuration: each configuration comes back once a cycle of
 * the rotation, and takes its next share then.
 */
export const SEEDS_FOR_EVERY_CONTROL = ROTATION.length * Math.max(...ROTATION.map(sharesOf));

/**
 * The controls a run lifts: in `npm test`, the seed's share of its configuration's (the cycle of the rotation,
 * floor(seed / 8), picks the share); an explicit list runs every control of each of its configurations.
 */
export function controlShares(chosen: { configs: readonly string[]; seed?: number }): ControlShare[] {
  if (chosen.seed === undefined) return chosen.configs.map(allControls);
  const cycle = Math.floor(chosen.seed / ROTATION.length);
  return chosen.configs.map((config) => {
    const parts = sharesOf(config);
    return { config, part: cycle % parts, parts };
  });
}

export interface FabricRun {
  readonly results: CellResult[];
  readonly retries: PluginRetry[];
  readonly configSeconds: Record<string, number>;
  readonly execs: Record<string, number>;
  readonly exitCode: number;
  readonly consoleTail: string;
  readonly wallMs: number;
}

export interface FabricOptions {
  readonly verbose?: boolean;
  /** Configurations to run (comma-separated), default all of them. */
  readonly only?: string;
  /** Configurations (or `all`) whose controls also run with their defence removed (guest/defences.ts). */
  readonly controls?: string;
}

export async function runFabric(options: FabricOptions = {}): Promise<FabricRun> {
  const started = Date.now();
  const outDir = resolve('.test-results/fabric');
  const resultFile = join(outDir, 'results.json');
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  await bundleGuest('test/fabric/guest/main.ts', join(outDir, 'guest.mjs'));
  await bundleGuest('test/fabric/guest/agent-main.ts', join(outDir, 'agent.mjs'));
  const cni = await buildCni(join(outDir, 'bin'));
  const policyFile = await writeNodePolicy(outDir);
  const run = await runInVm(['node', join(outDir, 'guest.mjs'), resultFile, cni, policyFile], {
    outDir,
    timeoutS: 2_400,
    memMiB: 3072,
    env: {
      ...(options.only ? { FABRIC_ONLY: options.only } : {}),
      ...(options.controls ? { FABRIC_CONTROLS: options.controls } : {}),
    },
    ...(options.verbose ? { onLine: (line: string) => process.stderr.write(`vm: ${line}\n`) } : {}),
  });
  const file: FabricResults = existsSync(resultFile)
    ? (JSON.parse(readFileSync(resultFile, 'utf8')) as FabricResults)
    : { cells: [], retries: [], configSeconds: {}, execs: {} };
  return {
    results: file.cells,
    retries: file.retries,
    configSeconds: file.configSeconds,
    execs: file.execs ?? {},
    exitCode: run.exitCode,
    consoleTail: run.console.slice(-6000),
    wallMs: Date.now() - started,
  };
}

/** The run's figures after the matrix: wall time, each configuration's time in the guest, every retry. */
export function formatRun(run: FabricRun): string {
  const configs = Object.entries(run.configSeconds).map(([c, s]) => `${c} ${s} s`);
  return [
    `fabric wall time: ${Math.round(run.wallMs / 1000)} s (configurations in the guest: ${configs.join(', ') || 'none'})`,
    `programs started in the guest: ${Object.values(run.execs).reduce((a, b) => a + b, 0)} (${Object.entries(run.execs)
      .sort(([, a], [, b]) => b - a)
      .map(([p, n]) => `${p} ${n}`)
      .join(', ')})`,
    `plugin calls retried (code 11, or a failed DEL): ${run.retries.length} (budget ${RETRY_BUDGET})`,
    ...run.retries.map((r) => `  ${r.node} ${r.command} ${r.containerId} attempt ${r.attempt}: ${r.details}: ${r.msg}`),
  ].join('\n');
}

/** The controls' runs with and without their defence (guest/defences.ts), one line each with what the cell said. */
export function formatControls(results: readonly CellResult[]): string {
  const rows = results.filter((r) => r.cell.startsWith('control '));
  if (rows.length === 0) return 'controls without their defence: not run';
  return [
    'controls without and with their defence:',
    ...rows.map((r) => `  ${r.ok ? 'ok  ' : 'FAIL'} ${r.config} | ${r.cell}${r.detail ? ` — ${r.detail}` : ''}`),
  ].join('\n');
}

export function unsupportedReason(r: CellResult): string | undefined {
  return UNSUPPORTED.find((u) => u.config.test(r.config) && u.cell.test(r.cell))?.why;
}

/** The matrix as a Markdown table: one row per cell, one column per configuration; reasons below. */
export function formatMatrix(results: readonly CellResult[]): string {
  const configs = [...new Set(results.map((r) => r.config))];
  const cells = [...new Set(results.map((r) => r.cell))];
  const notes: string[] = [];
  const mark = (r: CellResult | undefined): string => {
    if (!r) return '—';
    if (r.ok) return 'ok';
    notes.push(`${r.config} | ${r.cell}: ${r.detail}`);
    return unsupportedReason(r) ? `FAIL (unsupported, [${notes.length}])` : `FAIL [${notes.length}]`;
  };
  const lines = [`| cell | ${configs.join(' | ')} |`, `|---|${configs.map(() => '---').join('|')}|`];
  for (const cell of cells)
    lines.push(
      `| ${cell} | ${configs.map((c) => mark(results.find((r) => r.config === c && r.cell === cell))).join(' | ')} |`,
    );
  return [...lines, '', ...notes.map((n, i) => `[${i + 1}] ${n}`)].join('\n');
}
