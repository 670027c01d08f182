/**
 * Several guest suites in one VM boot. Each suite is an esbuild bundle run with plain node, one after the other,
 * each in its own network and mount namespace (a fresh root netns and /run/netns), so a suite starts from a clean
 * kernel state as it would after a boot of its own, without paying for one. A suite joins by exporting a
 * GuestSuite and adding it to the list of the file that boots (test/vm/ipvlan-vm.test.ts).
 */
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { expect, it } from 'vitest';
import { buildCni } from '../../packaging/build.js';
import type { GuestCaseResult } from './guest/runner.js';
import { bundleGuest, runInVm, shellQuote, writeNodePolicy } from './vm.js';

export interface GuestSuite {
  /** A short name: the suite's folder under the run's output folder and its tag in the console. */
  readonly name: string;
  /** The guest's entry point, bundled with bundleGuest. */
  readonly entry: string;
  /** Seconds the suite may take in the guest (the boot's limit is their sum). */
  readonly timeoutS: number;
  /**
   * Builds what the guest needs into `dir` and returns the guest's arguments after the result file (the node
   * policy is written once for every suite, at `policyFile`).
   */
  prepare(dir: string, policyFile: string): Promise<string[]>;
}

export interface SuiteRun {
  readonly results: GuestCaseResult[];
  /** The guest's exit status; undefined when it never finished (the VM died or timed out first). */
  readonly exitCode: number | undefined;
  /** What the suite printed, its end (for a failure message). */
  readonly consoleTail: string;
}

/**
 * The built plugin for a suite at `dir`, built once per boot beside the suites' folders: the suites of one boot
 * run the same bundle, and the V8 code cache the first suite's plugin calls write beside it (the output folder is
 * the guest's to write) spares the next suite's first calls the bundle's compilation under emulation.
 */
const cniBuilds = new Map<string, Promise<string>>();
export function sharedCni(dir: string): Promise<string> {
  const bin = join(dirname(dir), 'cni-bin');
  let built = cniBuilds.get(bin);
  if (!built) {
    built = buildCni(bin);
    cniBuilds.set(bin, built);
  }
  return built;
}

const START = 'VPC-SUITE-START';
const END = 'VPC-SUITE-EXIT';

/** Boots one VM and runs every suite in order; the results by suite name. */
export async function runGuestSuites(
  suites: readonly GuestSuite[],
  outDir: string,
  options: { onLine?: (line: string) => void } = {},
): Promise<Map<string, SuiteRun>> {
  rmSync(outDir, { recursive: true, force: true });
  cniBuilds.delete(join(outDir, 'cni-bin'));
  mkdirSync(outDir, { recursive: true });
  const policyFile = await writeNodePolicy(outDir);
  const steps: string[] = [];
  for (const suite of suites) {
    const dir = join(outDir, suite.name);
    mkdirSync(dir, { recursive: true });
    const bundle = join(dir, 'guest.mjs');
    await bundleGuest(suite.entry, bundle);
    const args = await suite.prepare(dir, policyFile);
    const argv = ['node', bundle, join(dir, 'results.json'), ...args].map(shellQuote).join(' ');
    // Every word is ours (paths and names of this repository's suites): nothing untrusted reaches the shell.
    steps.push(
      `echo ${START} ${suite.name}`,
      `unshare --mount --net sh -c 'mount -t tmpfs tmpfs /run/netns && exec "$@"' sh ${argv}`,
      `echo ${END} ${suite.name}=$?`,
    );
  }
  const timeoutS = suites.reduce((sum, s) => sum + s.timeoutS, 0);
  const run = await runInVm(['sh', '-c', steps.join('\n')], { outDir, timeoutS, onLine: options.onLine });
  const runs = new Map<string, SuiteRun>();
  for (const suite of suites) {
    const resultFile = join(outDir, suite.name, 'results.json');
    const results = existsSync(resultFile) ? (JSON.parse(readFileSync(resultFile, 'utf8')) as GuestCaseResult[]) : [];
    const from = run.console.indexOf(`${START} ${suite.name}`);
    const exit = new RegExp(`${END} ${suite.name}=(\\d+)`).exec(run.console);
    const own = from < 0 ? run.console : run.console.slice(from, exit ? exit.index + exit[0].length : undefined);
    runs.set(suite.name, { results, exitCode: exit ? Number(exit[1]) : undefined, consoleTail: own.slice(-4000) });
    console.log(`vm suite ${suite.name}: ${spentIn(results)}`);
  }
  return runs;
}

/** A suite's cases, seconds in the guest, programs started and retried plugin calls: its work, for the log. */
function spentIn(results: readonly GuestCaseResult[]): string {
  const seconds = results.reduce((sum, r) => sum + r.durationMs, 0) / 1000;
  const programs = results.reduce((sum, r) => sum + (r.programs ?? 0), 0);
  const retries = results.flatMap((r) => r.retries ?? []);
  const cpuS = (part: 'runner' | 'programs') => results.reduce((sum, r) => sum + (r.cpuMs?.[part] ?? 0), 0) / 1000;
  return [
    `${results.length} cases, ${seconds.toFixed(0)} s in the guest`,
    `guest CPU ${cpuS('runner').toFixed(0)} s in the runner + ${cpuS('programs').toFixed(0)} s in ${programs} programs started`,
    `${retries.length} plugin calls retried`,
  ].join(', ');
}

/**
 * Retried plugin calls (code 11, or a failed DEL) a suite may need before it fails: kubelet retries, so one
 * transient refusal is not a datapath bug, but a suite that keeps needing them is hiding one.
 */
export const GUEST_RETRY_BUDGET = 2;

/**
 * One test per case the guest must run (by name, from the list the guest itself runs), plus one that it ran no
 * other: a case that never ran (the guest died, or never started) fails as such, with the suite's console.
 */
export function guestCaseTests(expected: readonly string[], run: () => SuiteRun | undefined): void {
  it.each(expected)('guest: %s', (name) => {
    const result = run()?.results.find((r) => r.name === name);
    expect(result, `never ran; guest console:\n${run()?.consoleTail}`).toBeDefined();
    expect(result?.ok, result?.error).toBe(true);
  });

  it(`retried at most ${GUEST_RETRY_BUDGET} plugin calls (code 11, or a failed DEL)`, () => {
    const retries = (run()?.results ?? []).flatMap((r) => (r.retries ?? []).map((x) => `${r.name}: ${x}`));
    expect(retries.length, retries.join('\n')).toBeLessThanOrEqual(GUEST_RETRY_BUDGET);
  });

  it('ran no case the host does not know of', () => {
    expect((run()?.results ?? []).map((r) => r.name).filter((n) => !expected.includes(n))).toEqual([]);
  });
}
