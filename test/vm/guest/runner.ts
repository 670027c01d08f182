/**
 * The in-guest test runner. Under the VM's software emulation vitest takes ~12 s and tsx ~22 s just to start,
 * so the guest runs one esbuild bundle with plain node: cases run in order, each result is written as JSON to
 * the shared output folder, and the host-side vitest file turns each into a test of its own.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { execCounts } from '../../fabric/guest/net.js';

export interface GuestCase {
  readonly name: string;
  run(): Promise<void>;
}

export interface GuestCaseResult {
  readonly name: string;
  readonly ok: boolean;
  readonly error?: string;
  readonly durationMs: number;
  /** Programs the case started through guest-node.ts (plugin calls included): its work, which seconds do not show. */
  readonly programs?: number;
  /** Plugin calls the case retried as kubelet would (callAsKubelet), one line each. */
  readonly retries?: string[];
  /**
   * Guest CPU the case used: in the runner itself (the guest node's dynalite, IAM and IMDS, the harness) and in the
   * programs it started (plugin calls, ip, ping...). Under emulation the host pays about as much for each.
   */
  readonly cpuMs?: { readonly runner: number; readonly programs: number };
}

/** Every plugin call retried so far (guest-node.ts adds to it); each case's result lists its own. */
export const retriedCalls: string[] = [];

const programsStarted = (): number => Object.values(execCounts).reduce((a, b) => a + b, 0);

/** CPU ms of this process and of its children it has reaped (utime + stime of each, /proc/self/stat). */
function cpuNow(): { runner: number; programs: number } {
  const own = process.cpuUsage();
  // Fields after the command's closing parenthesis; cutime and cstime are the 14th and 15th of them, in ticks.
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
  return { runner: (own.user + own.system) / 1000, programs: (Number(fields[13]) + Number(fields[14])) * 10 };
}

export async function runGuestCases(cases: readonly GuestCase[], resultFile: string): Promise<number> {
  const results: GuestCaseResult[] = [];
  for (const c of cases) {
    const startedMs = Date.now();
    const programsBefore = programsStarted();
    const retriesBefore = retriedCalls.length;
    const cpuBefore = cpuNow();
    const spent = () => {
      const cpu = cpuNow();
      return {
        durationMs: Date.now() - startedMs,
        programs: programsStarted() - programsBefore,
        retries: retriedCalls.slice(retriesBefore),
        cpuMs: { runner: Math.round(cpu.runner - cpuBefore.runner), programs: cpu.programs - cpuBefore.programs },
      };
    };
    try {
      await c.run();
      const result = { name: c.name, ok: true, ...spent() };
      results.push(result);
      console.log(`ok - ${c.name} (${summary(result)})`);
    } catch (err) {
      const error = err instanceof Error ? (err.stack ?? err.message) : String(err);
      const result = { name: c.name, ok: false, error, ...spent() };
      results.push(result);
      console.log(`not ok - ${c.name} (${summary(result)})\n${error}`);
    }
    // Written after every case so a guest that dies midway still reports what ran.
    writeFileSync(resultFile, JSON.stringify(results, null, 1));
  }
  return results.filter((r) => !r.ok).length;
}

function summary(r: GuestCaseResult): string {
  const retries = r.retries?.length ? `, retried: ${r.retries.join('; ')}` : '';
  const cpu = r.cpuMs
    ? `, CPU ${(r.cpuMs.runner / 1000).toFixed(1)} s runner + ${(r.cpuMs.programs / 1000).toFixed(1)} s programs`
    : '';
  return `${(r.durationMs / 1000).toFixed(1)} s, ${r.programs} programs${cpu}${retries}`;
}
