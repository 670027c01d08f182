import { systemClock } from '../../shared/clock.js';
import { controlPlaneConfigFromEnv } from '../../shared/config/control-plane.js';
import { silentLogger } from '../../shared/log.js';
import { SdkReconcileEc2 } from '../../shared/reconcile/ec2.js';
import type { StrayPartition } from '../../shared/reconcile/gc-plan.js';
import {
  DEFAULT_MIN_MARK_AGE_MS,
  planReconcile,
  type ReconcilePlan,
  type ReconcilerDeps,
  reconcile,
} from '../../shared/reconcile/reconciler.js';
import { table } from '../table.js';
import { type Command, type CommandInput, print } from './command.js';

/**
 * One reconciler pass by hand — the same code the scheduled Lambda runs (two-pass ENI collection: a first pass
 * marks, a later one deletes; partitions of gone instances and stray-lease partitions removed). `--dry-run`
 * prints that pass's own plan (`planReconcile`) and changes nothing. The minimum ENI age comes from
 * VPC_LEASE_ENI_MIN_AGE_FOR_GC_MS like the Lambda's (default 10 minutes).
 */
export const gcCommand: Command = {
  name: 'gc',
  usage: 'vpc-lease gc [--dry-run] [--cluster NAME]',
  summary: 'collect leaked ENIs (two passes), partitions of gone instances and stray leases',
  options: ['dry-run'],
  positionals: [0, 0],
  async run(input) {
    const ctx = input.ctx();
    const config = { ...controlPlaneConfigFromEnv(input.io.env), clusterName: ctx.clusterName };
    const deps: ReconcilerDeps = {
      ec2: new SdkReconcileEc2(ctx.ec2(), ctx.metrics),
      store: ctx.store(),
      leasePartitions: ctx.leasePartitions(),
      config,
      clock: systemClock,
      logger: silentLogger,
      metrics: ctx.metrics,
    };
    if (input.line.options['dry-run']) {
      printPlan(input, await planReconcile(deps));
      return 0;
    }
    const report = await reconcile(deps);
    print(input, report, () => [
      `${report.enisSeen} ENIs seen: ${report.marked.length} marked, ${report.unmarked.length} unmarked, ${report.deleted.length} deleted, ${report.deleteFailed.length} failed`,
      ...report.deleted.map((id) => `  deleted ${id}`),
      ...report.marked.map(
        (id) => `  marked ${id} (deleted by a pass at least ${DEFAULT_MIN_MARK_AGE_MS / 1000} s later)`,
      ),
      `${report.partitionsRemoved.length} partitions of gone instances removed`,
      ...report.partitionsRemoved.map((arn) => `  removed ${arn}`),
      `${report.strayLeases.length} stray-lease partitions`,
      ...report.strayLeases.map((d) => `  ${d.action} ${d.instanceId} (${d.reason})`),
      `${report.drift.length} drift items (see \`vpc-lease audit\`)`,
    ]);
    return 0;
  },
};

/** The plan without its snapshot: what would change, and why. */
function printPlan(input: CommandInput, plan: ReconcilePlan): void {
  const eniActions = plan.eniGc.filter((d) => d.action !== 'keep');
  const partitions = plan.goneNodes.filter((d) => d.action !== 'unmark');
  print(
    input,
    {
      dryRun: true,
      enisSeen: plan.enis.length,
      eniActions,
      partitionsToRemove: partitions.map((d) => ({
        instanceId: d.node.instanceId,
        phase: d.node.phase,
        action: d.action,
      })),
      strayLeases: plan.strayLeases,
    },
    () => [
      `dry run: ${plan.enis.length} ENIs seen, nothing changed`,
      ...(eniActions.length > 0
        ? table(
            ['ENI', 'WOULD', 'WHY'],
            eniActions.map((d) => [d.eniId, d.action, d.reason]),
          )
        : ['no ENI to mark, unmark or delete']),
      ...(partitions.length > 0
        ? partitions.map(
            (d) =>
              `would ${d.action === 'mark' ? 'mark as gone (removed by a later pass)' : 'remove'} the partition of ${d.node.instanceId} (${d.node.phase}, instance gone)`,
          )
        : ['no partition to remove']),
      ...(plan.strayLeases.length > 0
        ? plan.strayLeases.map(
            (d) => `would ${STRAY_WOULD[d.action]} the stray leases of ${d.instanceId} (${d.reason})`,
          )
        : ['no stray-lease partition']),
    ],
  );
}

const STRAY_WOULD: Record<StrayPartition['action'], string> = {
  report: 'report (live instance, left for an operator)',
  mark: 'mark (removed by a later pass)',
  wait: 'wait on (marked, removed once the mark is old enough)',
  remove: 'remove',
};
