import { existsSync, readFileSync } from 'node:fs';
import { percentile } from './stats.js';

/**
 * The plugin logs, per ADD and DEL, the milliseconds since its process started at each phase
 * (`sinceStartMs: {start, identity, claim, netlink, datapath}`): medians of those say where the time goes —
 * the "biggest cost" of the cni figures — without instrumenting the binary.
 */
export function phaseMediansMs(logFile: string, message: string): Record<string, number> {
  const byPhase = new Map<string, number[]>();
  for (const marks of phaseMarks(logFile, message))
    for (const [phase, ms] of Object.entries(marks)) byPhase.set(phase, [...(byPhase.get(phase) ?? []), ms]);
  return Object.fromEntries([...byPhase].map(([phase, values]) => [phase, percentile(values, 50)]));
}

/** Each `message` record's marks (`sinceStartMs`), optionally only those the process `pid` wrote. */
function phaseMarks(logFile: string, message: string, pid?: number): Record<string, number>[] {
  if (!existsSync(logFile)) return [];
  const out: Record<string, number>[] = [];
  for (const line of readFileSync(logFile, 'utf8').split('\n')) {
    if (!line.includes(`"${message}"`)) continue;
    let entry: { msg?: unknown; pid?: unknown; sinceStartMs?: Record<string, unknown> };
    try {
      entry = JSON.parse(line) as typeof entry;
    } catch {
      continue;
    }
    if (entry.msg !== message || typeof entry.sinceStartMs !== 'object' || entry.sinceStartMs === null) continue;
    if (pid !== undefined && entry.pid !== pid) continue;
    out.push(
      Object.fromEntries(
        Object.entries(entry.sinceStartMs).filter((e): e is [string, number] => typeof e[1] === 'number'),
      ),
    );
  }
  return out;
}

/**
 * For a resident process (the agent), marks since its start mean nothing per call: the medians of each step's
 * own duration instead (`claim` is the time from the previous mark to the claim mark), and `total`, first to last.
 */
export function phaseStepMediansMs(logFile: string, message: string, pid: number): Record<string, number> {
  const bySteps = new Map<string, number[]>();
  const add = (step: string, ms: number) => bySteps.set(step, [...(bySteps.get(step) ?? []), ms]);
  for (const marks of phaseMarks(logFile, message, pid)) {
    const ordered = Object.entries(marks);
    for (let i = 1; i < ordered.length; i++) add(ordered[i]![0], ordered[i]![1] - ordered[i - 1]![1]);
    if (ordered.length > 1) add('total', ordered.at(-1)![1] - ordered[0]![1]);
  }
  return Object.fromEntries([...bySteps].map(([step, values]) => [step, percentile(values, 50)]));
}
