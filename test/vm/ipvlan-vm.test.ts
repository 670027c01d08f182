import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildCni } from '../../infra/build.js';
import { missing } from '../support/capabilities.js';
import { ADD_STEPS, guestCases } from './guest/plugin-cases.js';
import type { GuestCaseResult } from './guest/runner.js';
import { bundleGuest, runInVm, writeNodePolicy } from './vm.js';

/**
 * Boots one VM (real ipvlan), runs the bundled guest suite there, and turns each guest case into a test here,
 * so a guest failure reads like any other failing test. The expected cases come from the same list the guest
 * runs; a case that never ran (the guest died, or never started) fails as such. The plugin is built here first (the guest runs it as a runtime would:
 * dist-style executable, env + stdin), into the result folder the guest can write (the launcher writes its V8
 * code cache beside itself).
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
    await bundleGuest('test/vm/guest/main.ts', join(outDir, 'guest.mjs'));
    const cni = await buildCni(join(outDir, 'bin'));
    const policyFile = await writeNodePolicy(outDir);
    const run = await runInVm(['node', join(outDir, 'guest.mjs'), resultFile, cni, policyFile], {
      outDir,
      timeoutS: 1_500,
      onLine: process.env['VPC_LEASE_VM_VERBOSE'] === '1' ? (line) => process.stderr.write(`vm: ${line}\n`) : undefined,
    });
    consoleTail = run.console.slice(-4000);
    if (existsSync(resultFile)) results = JSON.parse(readFileSync(resultFile, 'utf8')) as GuestCaseResult[];
  }, 1_560_000);

  it('ran the guest suite to the end', () => {
    expect(results.length, `guest console:\n${consoleTail}`).toBeGreaterThan(0);
  });

  const expected = guestCases(
    async () => undefined,
    () => {
      throw new Error('host side: never run');
    },
  ).map((c) => c.name);
  it.each(expected)('guest: %s', (name) => {
    const result = results.find((r) => r.name === name);
    expect(result, `never ran; guest console:\n${consoleTail}`).toBeDefined();
    expect(result?.ok, result?.error).toBe(true);
  });

  it('ran no case the host does not know of', () => {
    expect(results.map((r) => r.name).filter((n) => !expected.includes(n))).toEqual([]);
  });

  it('checks ipvlan in all three modes', () => {
    for (const mode of ['l2', 'l3', 'l3s']) {
      expect(results.find((r) => r.name === `guest kernel creates an ipvlan link in mode ${mode}`)?.ok).toBe(true);
    }
  });

  it('hands the plugin a down pod ENI and sees its pods cut off without the up step (issue 26)', () => {
    const ran = results.filter((r) => r.name.startsWith('eni link: '));
    expect(ran.map((r) => r.name)).toEqual([
      expect.stringContaining('arrives as EC2 hot-plugs it'),
      expect.stringContaining('negative control'),
      expect.stringContaining('parallel ADDs bring the down ENI up'),
    ]);
    expect(ran.every((r) => r.ok)).toBe(true);
  });

  it('drives the built plugin through ADD, CHECK and DEL in all three modes', () => {
    for (const mode of ['l2', 'l3', 'l3s']) {
      const ran = results.filter((r) => r.name.startsWith(`plugin ${mode}: `));
      expect(ran.map((r) => r.name)).toEqual([
        expect.stringContaining('reach each other'),
        expect.stringContaining('DEL leaves no link'),
        ...(mode === 'l3s' ? ADD_STEPS.map((s) => expect.stringContaining(`failing after ${s} `)) : []),
      ]);
      expect(ran.every((r) => r.ok)).toBe(true);
    }
  });
});
