/** What the fabric's cells share: the pods they run in, the cell shape, and the small probes (HTTP GET, ping). */
import type { Eni } from '../topology.js';
import { exec } from './net.js';

export interface Pod {
  readonly ns: string;
  readonly id: string;
  readonly ip: string;
  readonly eni: Eni;
  readonly name: string;
}

export interface NodePods {
  readonly client: Pod;
  readonly same: Pod;
  readonly other: Pod;
  readonly noVeth: Pod;
}

export interface Cell {
  readonly name: string;
  run(): Promise<string | undefined>;
}

export function short(text: string): string {
  return text.replace(/\s+/g, ' ').trim().slice(0, 240);
}

/** HTTP GET from a namespace; the body, or undefined with why. */
export async function get(ns: string | undefined, url: string, seconds = 12): Promise<{ body?: string; why: string }> {
  const r = await exec(ns, ['timeout', String(seconds), 'busybox', 'wget', '-q', '-O', '-', url]);
  return r.code === 0
    ? { body: r.stdout, why: '' }
    : { why: r.code === 124 ? 'timed out' : short(r.stderr) || `exit ${r.code}` };
}

/** Three echoes, any answer counts: a lone first packet lost to neighbour resolution is not a dead path. */
export async function ping(ns: string | undefined, target: string, extra: readonly string[] = []): Promise<boolean> {
  const r = await exec(ns, ['busybox', 'ping', '-c', '3', '-W', '8', ...extra, target]);
  return r.code === 0;
}
