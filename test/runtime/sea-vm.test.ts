import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildSea } from '../../infra/build.js';
import { missing } from '../support/capabilities.js';
import type { GuestCaseResult } from '../vm/guest/runner.js';
import { bundleGuest, runInVm, writeNodePolicy } from '../vm/vm.js';

/**
 * The single executable in the ipvlan VM (one boot for this file): installed by itself and run with Node masked,
 * ADD and DEL on real ipvlan. The guest cases live in guest/sea-main.ts.
 */
const skipReason = missing('vm', 'root');
const outDir = resolve('.test-results/sea-vm');
const resultFile = join(outDir, 'results.json');
const CASES = [
  'sea: node is masked in the namespace the executable runs in',
  'sea: installs itself and answers VERSION with no Node.js',
  'sea: ADD and DEL with real ipvlan L2 and no Node.js',
];
let results: GuestCaseResult[] = [];
let consoleTail = '';

describe.skipIf(skipReason !== undefined)('VM: the single executable on real ipvlan, without Node.js', () => {
  beforeAll(async () => {
    rmSync(outDir, { recursive: true, force: true });
    mkdirSync(outDir, { recursive: true });
    await bundleGuest('test/runtime/guest/sea-main.ts', join(outDir, 'guest.mjs'));
    const sea = await buildSea(join(outDir, 'bin'), { reuse: true });
    const policyFile = await writeNodePolicy(outDir);
    const run = await runInVm(['node', join(outDir, 'guest.mjs'), resultFile, sea, policyFile], {
      outDir,
      timeoutS: 600,
      onLine: process.env['VPC_LEASE_VM_VERBOSE'] === '1' ? (line) => process.stderr.write(`vm: ${line}\n`) : undefined,
    });
    consoleTail = run.console.slice(-4000);
    if (existsSync(resultFile)) results = JSON.parse(readFileSync(resultFile, 'utf8')) as GuestCaseResult[];
  }, 660_000);

  it.each(CASES)('guest: %s', (name) => {
    const result = results.find((r) => r.name === name);
    expect(result, `never ran; guest console:\n${consoleTail}`).toBeDefined();
    expect(result?.ok, result?.error).toBe(true);
  });

  it('ran no case the host does not know of', () => {
    expect(results.map((r) => r.name).filter((n) => !CASES.includes(n))).toEqual([]);
  });
});
