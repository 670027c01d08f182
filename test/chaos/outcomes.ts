import type { NodeRecord } from '../../shared/domain/node.js';

/** How each launch of a schedule ended, read once the scale-out settled (before any scale-in). */
export interface LaunchEnds {
  /** Hook results the control plane completed (CONTINUE / ABANDON) and the simulator's timeouts. */
  readonly hookResults: readonly { readonly instanceId: string; readonly result: string }[];
  /** The node items of the schedule's instances. */
  readonly nodes: readonly Pick<NodeRecord, 'instanceId' | 'phase' | 'failureReason'>[];
  /** The instance the schedule terminated mid-provisioning, if any: its launch may end any way. */
  readonly victim: string | undefined;
}

/**
 * What every schedule family must end with. Chaos injects only faults that pass (retryable EC2 errors,
 * throttling, crashes, duplicates, eventual consistency), so no launch may fail for them: with a hook every
 * launch is CONTINUEd (a forced-timeout schedule's first launches time out, which the simulator records, never
 * an ABANDON of ours); without one every tagged instance's node ends READY, never FAILED. An ABANDON or a
 * FAILED node is a violation naming its reason, not only a figure in the summary. The victim of a
 * terminate-mid-provisioning schedule is spared: EC2 refusing an attach to a terminated instance may end it.
 */
export function launchOutcomeViolations(ends: LaunchEnds): string[] {
  const spared = (id: string) => id === ends.victim;
  const out: string[] = [];
  const abandoned = ends.hookResults.filter((r) => r.result === 'ABANDON' && !spared(r.instanceId));
  const failed = ends.nodes.filter((n) => n.phase === 'FAILED' && !spared(n.instanceId));
  if (abandoned.length > 0)
    out.push(
      `outcome: ${abandoned.length} launch(es) abandoned under passing faults: ${abandoned.map((r) => r.instanceId).join(', ')}`,
    );
  for (const n of failed) out.push(`outcome: launch of ${n.instanceId} FAILED: ${n.failureReason ?? 'no reason'}`);
  return out;
}

/** The full-subnets family's ends: how each launch ended and the room left in each pod subnet of the AZ. */
export interface FillEnds extends LaunchEnds {
  /** Free addresses per candidate pod subnet (EC2's count, read once the scale-out settled). */
  readonly freeAddresses: Readonly<Record<string, number>>;
  /** Leases a launch needs before it may complete (`minLeases`). */
  readonly minLeases: number;
}

/**
 * What the full-subnets family must end with, beyond every schedule's outcome: a launch is abandoned only when
 * no candidate subnet can hold its minimum (a new ENI takes one address for itself, and in prefix mode the
 * fallback to single addresses is on), and then its node item says so plainly (`subnets-exhausted: …`). The
 * victim of a terminate-mid-provisioning schedule is spared, as in launchOutcomeViolations.
 */
export function fillOutcomeViolations(ends: FillEnds): string[] {
  const roomy = Object.entries(ends.freeAddresses).filter(([, free]) => free - 1 >= ends.minLeases);
  const out: string[] = [];
  const gaveUp = new Set([
    ...ends.hookResults.filter((r) => r.result === 'ABANDON').map((r) => r.instanceId),
    ...ends.nodes.filter((n) => n.phase === 'FAILED').map((n) => n.instanceId),
  ]);
  for (const id of [...gaveUp].filter((i) => i !== ends.victim)) {
    const reason = ends.nodes.find((n) => n.instanceId === id)?.failureReason;
    if (roomy.length > 0)
      out.push(
        `full subnets: launch of ${id} abandoned though ${roomy.map(([s, free]) => `${s} (${free} free)`).join(', ')} could hold its minimum of ${ends.minLeases}`,
      );
    else if (!reason?.startsWith('subnets-exhausted: '))
      out.push(
        `full subnets: launch of ${id} abandoned with every subnet full, but its node item does not say so: ${reason ?? 'no reason'}`,
      );
  }
  return out;
}
