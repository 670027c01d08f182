/**
 * `npm test`: runs every suite through vitest, then prints the plain closing line the CI harness reads —
 * `N passed, N failed` (after a line with the skipped count) — computed from vitest's JSON report, not from its
 * console summary.
 * Extra arguments are passed to vitest (e.g. a file filter).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';

interface VitestJson {
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  numTodoTests: number;
  numTotalTestSuites: number;
  testResults: { name: string; status: string; message?: string; assertionResults: unknown[] }[];
}

const outDir = '.test-results';
mkdirSync(outDir, { recursive: true });
const report = join(outDir, 'vitest.json');
rmSync(report, { force: true });

const run = spawnSync(
  process.execPath,
  [
    'node_modules/vitest/vitest.mjs',
    'run',
    '--reporter=default',
    '--reporter=json',
    `--outputFile.json=${report}`,
    ...process.argv.slice(2),
  ],
  { stdio: 'inherit', env: process.env },
);

let passed = 0;
let failed = 0;
let skipped = 0;
if (existsSync(report)) {
  const json = JSON.parse(readFileSync(report, 'utf8')) as VitestJson;
  passed = json.numPassedTests;
  failed = json.numFailedTests;
  skipped = json.numPendingTests + json.numTodoTests;
  // A suite that fails to load has no test results of its own: count it as one failure so it cannot vanish.
  for (const file of json.testResults) {
    if (file.status === 'failed' && file.assertionResults.length === 0) failed += 1;
  }
}
if (run.status !== 0 && failed === 0) failed = 1; // vitest itself failed (crash, no report): never green
console.log(`${skipped} skipped`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
