import { existsSync, readFileSync } from 'node:fs';
import { percentile } from './stats.js';

/**
 * The plugin logs, per ADD and DEL, the milliseconds since its process started at each phase
 * (`sinceStartMs: {start, identity, claim, netlink, datapath}`): medians of those say where the time goes —
 * the "biggest cost" of the cni figures — without instrumenting the binary.
 */
export function phaseMediansMs(logFile: string, message: string): Record<string, number> {
  if (!existsSync(logFile)) return {};
  const byPhase = new Map<string, number[]>();
  for (const line of readFileSync(logFile, 'utf8').split('\n')) {
    if (!line.includes(`"${message}"`)) continue;
    let entry: { msg?: unknown; sinceStartMs?: Record<string, unknown> };
    try {
      entry = JSON.parse(line) as typeof entry;
    } catch {
      continue;
    }
    if (entry.msg !== message || typeof entry.sinceStartMs !== 'object' || entry.sinceStartMs === null) continue;
    for (const [phase, ms] of Object.entries(entry.sinceStartMs))
      if (typeof ms === 'number') byPhase.set(phase, [...(byPhase.get(phase) ?? []), ms]);
  }
  return Object.fromEntries([...byPhase].map(([phase, values]) => [phase, percentile(values, 50)]));
}
