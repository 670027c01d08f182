import type { Lease } from '../../../shared/domain/lease.js';

/** The agent's counters of CNI commands, by who ran them (read from its metrics). */
export interface AgentCounts {
  readonly agentAdds: number;
  readonly agentDels: number;
  readonly fallbackAdds: number;
  readonly fallbackDels: number;
}

/** Sum of the samples of `name` whose labels include `labels`, from a text exposition. */
export function sample(exposition: string, name: string, labels: Record<string, string>): number {
  let sum = 0;
  for (const line of exposition.split('\n')) {
    const m = /^([a-z_]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) sum += Number(m[3]);
  }
  return sum;
}

export function agentCounts(exposition: string): AgentCounts {
  // Every command the agent ran, whatever its result, is one observation of its duration on the agent path.
  const viaAgent = (command: string) =>
    sample(exposition, 'vpc_lease_cni_request_duration_seconds_count', { command, path: 'agent' });
  const fallback = (command: string) => sample(exposition, 'vpc_lease_fallback_executions_total', { command });
  return {
    agentAdds: viaAgent('ADD'),
    agentDels: viaAgent('DEL'),
    fallbackAdds: fallback('ADD'),
    fallbackDels: fallback('DEL'),
  };
}

/** What a wave needs of the node under test (agent-cri.test.ts's suite). */
export interface WaveNode {
  /** The counts once every fallback record is counted. */
  settledCounts(what: string): Promise<AgentCounts>;
  leases(): Promise<Lease[]>;
  /** Runs the pods together, each retried once on a retryable failure (names pushed to `retried`). */
  startAll(names: readonly string[], retried: string[]): Promise<Map<string, string>>;
  /** Starts the agent container again and waits until it serves. */
  restartAgent(): Promise<void>;
  /** One lease per pod, held by its sandbox: the claimed leases. */
  expectOneLeaseEach(ids: Map<string, string>): Promise<Lease[]>;
  /** Who ran the successful ADDs of these sandboxes, from the plugin log. */
  addsBy(ids: Iterable<string>): Promise<{ agent: number; fallback: number }>;
  /** Removes the pods and checks every lease they claimed is back in COOLDOWN. */
  expectNoLeak(ids: Map<string, string>, before: Map<string, string>, claimed: Lease[]): Promise<void>;
}

export interface WaveSteps {
  /** After the counts settle, before the wave starts (e.g. an agent made to hang). */
  readonly prepare?: () => Promise<void>;
  /** While the wave is under way: stops the agent; returns the pods it started in the gap, if any. */
  readonly interrupt: (wave: readonly string[], retried: string[]) => Promise<Map<string, string>>;
}

export interface WaveOutcome {
  /** The pods started before the interruption, and the one started after the agent is back. */
  readonly wave: readonly string[];
  readonly later: readonly string[];
  readonly gapIds: Map<string, string>;
  /** Every pod of the wave, the gap and after: name → sandbox id. */
  readonly ids: Map<string, string>;
  readonly claimed: Lease[];
  readonly now: AgentCounts;
  readonly ran: { agent: number; fallback: number };
  readonly retried: readonly string[];
}

export const waveNames = (tag: string, n: number): string[] => Array.from({ length: n }, (_, i) => `${tag}-${i}`);

/**
 * Three pods start, the agent is interrupted under them, comes back, and one more pod starts: every pod must hold
 * exactly one lease. `assess` checks who ran what; then the pods are removed and nothing may have leaked.
 */
export async function interruptedWave(
  node: WaveNode,
  tag: string,
  steps: WaveSteps,
  assess: (outcome: WaveOutcome) => Promise<void>,
): Promise<void> {
  await node.settledCounts(`${tag}: before`);
  const before = new Map((await node.leases()).map((l) => [l.ip, l.state as string]));
  await steps.prepare?.();
  const retried: string[] = [];
  const wave = waveNames(tag, 3);
  const first = node.startAll(wave, retried);
  const gapIds = await steps.interrupt(wave, retried);
  const [firstIds] = await Promise.all([first, node.restartAgent()]);
  const later = waveNames(`${tag}-after`, 1);
  const ids = new Map([...firstIds, ...gapIds, ...(await node.startAll(later, retried))]);
  const claimed = await node.expectOneLeaseEach(ids);
  const now = await node.settledCounts(`${tag}: after`);
  const ran = await node.addsBy(ids.values());
  await assess({ wave, later, gapIds, ids, claimed, now, ran, retried });
  process.stderr.write(
    `agent-cri ${tag}: ${ids.size} pods, ${retried.length} retried, ${JSON.stringify(now)}, ran ${JSON.stringify(ran)}\n`,
  );
  await node.expectNoLeak(ids, before, claimed);
}
