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
