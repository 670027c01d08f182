import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { build } from 'esbuild';
import { beforeAll, describe, expect, it } from 'vitest';
import { missing } from '../support/capabilities.js';
import type { GuestCaseResult } from './guest/runner.js';
import { runInVm } from './vm.js';

/**
 * Boots one VM (real ipvlan), runs the bundled guest suite there, and turns each guest case into a test here,
 * so a guest failure reads like any other failing test. The case list is read from the guest's results; a guest
 * that never ran fails the whole file.
 */
const skipReason = missing('vm', 'root');
const outDir = resolve('.test-results/vm');
const resultFile = join(outDir, 'results.json');
let results: GuestCaseResult[] = [];
let consoleTail = '';

describe.skipIf(skipReason !== undefined)('VM: real ipvlan suite', () => {
  beforeAll(async () => {
    rmSync(outDir, { recursive: true, force: true });
    mkdirSync(outDir, { recursive: true });
    await build({
      entryPoints: ['test/vm/guest/main.ts'],
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      outfile: join(outDir, 'guest.mjs'),
      external: ['netlink'],
      banner: { js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" },
      logLevel: 'warning',
    });
    const run = await runInVm(['node', join(outDir, 'guest.mjs'), resultFile], { outDir, timeoutS: 600 });
    consoleTail = run.console.slice(-4000);
    if (existsSync(resultFile)) results = JSON.parse(readFileSync(resultFile, 'utf8')) as GuestCaseResult[];
  }, 660_000);

  it('ran the guest suite to the end', () => {
    expect(results.length, `guest console:\n${consoleTail}`).toBeGreaterThan(0);
  });

  it('passes every guest case', () => {
    const failures = results.filter((r) => !r.ok).map((r) => `${r.name}\n${r.error}`);
    expect(failures, `guest console:\n${consoleTail}`).toEqual([]);
  });

  it('checks ipvlan in all three modes', () => {
    for (const mode of ['l2', 'l3', 'l3s']) {
      expect(results.find((r) => r.name === `guest kernel creates an ipvlan link in mode ${mode}`)?.ok).toBe(true);
    }
  });
});
