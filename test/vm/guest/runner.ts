/**
 * The in-guest test runner. Under the VM's software emulation vitest takes ~12 s and tsx ~22 s just to start,
 * so the guest runs one esbuild bundle with plain node: cases run in order, each result is written as JSON to
 * the shared output folder, and the host-side vitest file turns each into a test of its own.
 */
import { writeFileSync } from 'node:fs';

export interface GuestCase {
  readonly name: string;
  run(): Promise<void>;
}

export interface GuestCaseResult {
  readonly name: string;
  readonly ok: boolean;
  readonly error?: string;
  readonly durationMs: number;
}

export async function runGuestCases(cases: readonly GuestCase[], resultFile: string): Promise<number> {
  const results: GuestCaseResult[] = [];
  for (const c of cases) {
    const startedMs = Date.now();
    try {
      await c.run();
      results.push({ name: c.name, ok: true, durationMs: Date.now() - startedMs });
      console.log(`ok - ${c.name}`);
    } catch (err) {
      const error = err instanceof Error ? (err.stack ?? err.message) : String(err);
      results.push({ name: c.name, ok: false, error, durationMs: Date.now() - startedMs });
      console.log(`not ok - ${c.name}\n${error}`);
    }
    // Written after every case so a guest that dies midway still reports what ran.
    writeFileSync(resultFile, JSON.stringify(results, null, 1));
  }
  return results.filter((r) => !r.ok).length;
}
