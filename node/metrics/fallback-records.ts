import { appendFileSync, existsSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { CniMetricCommand, CommandObservation } from './node-metrics.js';

/**
 * Commands the full plugin ran as its own process (the shim found no agent), one JSON line each in
 * `<dataDir>/fallback-records.jsonl`, which the agent drains into its metrics. Appends of one short line with
 * O_APPEND do not interleave. The file stops growing at FALLBACK_RECORDS_MAX_BYTES: a node without an agent
 * (nobody drains) must not fill its disk.
 */
export const FALLBACK_RECORDS_FILE = 'fallback-records.jsonl';
export const FALLBACK_RECORDS_MAX_BYTES = 1024 * 1024;
const DRAINING_SUFFIX = '.draining';
const DRAIN_SETTLE_MS = 1000;

export interface FallbackRecord {
  readonly command: CniMetricCommand;
  readonly code: number;
  readonly durationS: number;
  readonly atMs: number;
}

export function fallbackRecordsPath(dataDir: string): string {
  return join(dataDir, FALLBACK_RECORDS_FILE);
}

/** Appends one record; returns false when the file is full or cannot be written (never throws: a pod comes first). */
export function appendFallbackRecord(dataDir: string, record: FallbackRecord): boolean {
  const path = fallbackRecordsPath(dataDir);
  try {
    if (existsSync(path) && statSync(path).size >= FALLBACK_RECORDS_MAX_BYTES) return false;
    appendFileSync(path, `${JSON.stringify(record)}\n`, { mode: 0o600 });
    return true;
  } catch {
    return false;
  }
}

const COMMANDS = new Set<string>(['ADD', 'DEL', 'CHECK', 'GC', 'STATUS']);

function parseRecord(line: string): CommandObservation | undefined {
  try {
    const r = JSON.parse(line) as Partial<FallbackRecord>;
    if (typeof r.command !== 'string' || !COMMANDS.has(r.command)) return undefined;
    if (!Number.isInteger(r.code) || typeof r.durationS !== 'number' || !(r.durationS >= 0)) return undefined;
    return { command: r.command as CniMetricCommand, path: 'fallback', code: r.code as number, durationS: r.durationS };
  } catch {
    return undefined;
  }
}

/**
 * Takes the records in two steps: the file set aside by the previous drain is read and removed, then the live
 * file is set aside for the next one. A plugin that opened the live file just before the rename finishes its one
 * write long before the next drain (at least a second later), so no record is read twice or lost. Ill-formed
 * lines are skipped.
 */
export function drainFallbackRecords(dataDir: string, nowMs: number): CommandObservation[] {
  const live = fallbackRecordsPath(dataDir);
  const aside = live + DRAINING_SUFFIX;
  const out: CommandObservation[] = [];
  if (existsSync(aside)) {
    // rename(2) sets ctime: a file set aside within the last second may still take a late append.
    if (nowMs - statSync(aside).ctimeMs < DRAIN_SETTLE_MS) return out;
    for (const line of readFileSync(aside, 'utf8').split('\n')) {
      const record = line.trim() === '' ? undefined : parseRecord(line);
      if (record) out.push(record);
    }
    rmSync(aside, { force: true });
  }
  if (existsSync(live)) renameSync(live, aside);
  return out;
}
