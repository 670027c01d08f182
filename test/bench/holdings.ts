/** One pod's hold on an address, from the end of its ADD to the start of its DEL: the span it surely held it. */
export interface Holding {
  readonly ip: string;
  readonly pod: string;
  readonly fromMs: number;
  readonly untilMs: number;
}

/**
 * Pairs of pods that surely held the same address at the same time (invariant 1). Spans are taken inside the
 * true hold (after ADD returned, before DEL began), so a pair counted here is a real duplicate, never an
 * artefact of process scheduling.
 */
export function countDuplicates(holdings: readonly Holding[]): number {
  const byIp = new Map<string, Holding[]>();
  for (const h of holdings) byIp.set(h.ip, [...(byIp.get(h.ip) ?? []), h]);
  let duplicates = 0;
  for (const list of byIp.values()) {
    const sorted = [...list].sort((a, b) => a.fromMs - b.fromMs);
    for (let i = 0; i < sorted.length; i++)
      for (let j = i + 1; j < sorted.length && sorted[j]!.fromMs < sorted[i]!.untilMs; j++)
        if (sorted[j]!.pod !== sorted[i]!.pod) duplicates += 1;
  }
  return duplicates;
}
