/**
 * Host side of the fabric suite: bundles the guest, builds the plugin the way `npm run build` does, boots one VM
 * for every cell, and formats the matrix. Used by `npm run fabric` (prints the table) and by fabric.test.ts.
 */
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { buildCni } from '../../infra/build.js';
import { bundleGuest, runInVm, writeNodePolicy } from '../vm/vm.js';
import type { CellResult } from './guest/cells.js';

export type { CellResult };

/**
 * Cells that cannot work in some configuration, with the reason (README and report). A FAIL in any other cell
 * fails the suite. A listed cell is still run and printed, pass or fail. None today: every cell works in every
 * configuration.
 */
export const UNSUPPORTED: readonly { readonly config: RegExp; readonly cell: RegExp; readonly why: string }[] = [];

export interface FabricRun {
  readonly results: CellResult[];
  readonly exitCode: number;
  readonly consoleTail: string;
  readonly wallMs: number;
}

export async function runFabric(options: { verbose?: boolean; only?: string } = {}): Promise<FabricRun> {
  const started = Date.now();
  const outDir = resolve('.test-results/fabric');
  const resultFile = join(outDir, 'results.json');
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  await bundleGuest('test/fabric/guest/main.ts', join(outDir, 'guest.mjs'));
  const cni = await buildCni(join(outDir, 'bin'));
  const policyFile = await writeNodePolicy(outDir);
  const run = await runInVm(['node', join(outDir, 'guest.mjs'), resultFile, cni, policyFile], {
    outDir,
    timeoutS: 2_400,
    memMiB: 3072,
    ...(options.only ? { env: { FABRIC_ONLY: options.only } } : {}),
    ...(options.verbose ? { onLine: (line: string) => process.stderr.write(`vm: ${line}\n`) } : {}),
  });
  const results = existsSync(resultFile) ? (JSON.parse(readFileSync(resultFile, 'utf8')) as CellResult[]) : [];
  return { results, exitCode: run.exitCode, consoleTail: run.console.slice(-6000), wallMs: Date.now() - started };
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
