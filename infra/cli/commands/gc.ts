import { systemClock } from '../../../shared/clock.js';
import { controlPlaneConfigFromEnv } from '../../../shared/config/control-plane.js';
import { ENI_TAGS } from '../../../shared/ec2/tags.js';
import { silentLogger } from '../../../shared/log.js';
import { SdkReconcileEc2 } from '../../../shared/reconcile/ec2.js';
import { decideEniGc, decideGoneNodes } from '../../../shared/reconcile/gc-plan.js';
import { DEFAULT_MIN_MARK_AGE_MS, reconcile } from '../../../shared/reconcile/reconciler.js';
import { table } from '../table.js';
import { type Command, print } from './command.js';

/**
 * One reconciler pass by hand — the same code the scheduled Lambda runs (two-pass ENI collection: a first pass
 * marks, a later one deletes; partitions of gone instances removed). `--dry-run` shows the decisions and
 * changes nothing. The minimum ENI age comes from VPC_LEASE_ENI_MIN_AGE_FOR_GC_MS like the Lambda's (default
 * 10 minutes).
 */
export const gcCommand: Command = {
  name: 'gc',
  usage: 'vpc-lease gc [--dry-run] [--cluster NAME]',
  summary: 'collect leaked ENIs (two passes) and partitions of gone instances',
  options: ['dry-run'],
  positionals: [0, 0],
  async run(input) {
    const ctx = input.ctx();
    const config = { ...controlPlaneConfigFromEnv(input.io.env), clusterName: ctx.clusterName };
    const ec2 = new SdkReconcileEc2(ctx.ec2(), ctx.metrics);
    const store = ctx.store();
    if (input.line.options['dry-run']) {
      const nowMs = Date.now();
      const enis = await ec2.describeNetworkInterfaces({ tags: { [ENI_TAGS.cluster]: ctx.clusterName } });
      const nodes = await store.listNodes();
      const ids = new Set(nodes.map((n) => n.instanceId));
      for (const e of enis) {
        const tagged = e.tags[ENI_TAGS.instance];
        if (tagged) ids.add(tagged);
        if (e.attachment?.instanceId) ids.add(e.attachment.instanceId);
      }
      const instanceStates = await ec2.describeInstanceStates([...ids]);
      const decisions = decideEniGc({
        nowMs,
        minEniAgeMs: config.eniMinAgeForGcMs,
        minMarkAgeMs: DEFAULT_MIN_MARK_AGE_MS,
        enis,
        nodes,
        instanceStates,
      }).filter((d) => d.action !== 'keep');
      const gone = decideGoneNodes({
        nowMs,
        minAgeMs: config.eniMinAgeForGcMs,
        minMarkAgeMs: DEFAULT_MIN_MARK_AGE_MS,
        nodes,
        instanceStates,
      }).filter((d) => d.action !== 'unmark');
      const plan = {
        dryRun: true,
        enisSeen: enis.length,
        eniActions: decisions,
        partitionsToRemove: gone.map((d) => ({ instanceId: d.node.instanceId, phase: d.node.phase, action: d.action })),
      };
      print(input, plan, () => [
        `dry run: ${enis.length} ENIs seen, nothing changed`,
        ...(decisions.length > 0
          ? table(
              ['ENI', 'WOULD', 'WHY'],
              decisions.map((d) => [d.eniId, d.action, d.reason]),
            )
          : ['no ENI to mark, unmark or delete']),
        ...(gone.length > 0
          ? gone.map(
              (d) =>
                `would ${d.action === 'mark' ? 'mark as gone (removed by a later pass)' : 'remove'} the partition of ${d.node.instanceId} (${d.node.phase}, instance gone)`,
            )
          : ['no partition to remove']),
      ]);
      return 0;
    }
    const report = await reconcile({
      ec2,
      store,
      config,
      clock: systemClock,
      logger: silentLogger,
      metrics: ctx.metrics,
    });
    print(input, report, () => [
      `${report.enisSeen} ENIs seen: ${report.marked.length} marked, ${report.unmarked.length} unmarked, ${report.deleted.length} deleted, ${report.deleteFailed.length} failed`,
      ...report.deleted.map((id) => `  deleted ${id}`),
      ...report.marked.map(
        (id) => `  marked ${id} (deleted by a pass at least ${DEFAULT_MIN_MARK_AGE_MS / 1000} s later)`,
      ),
      `${report.partitionsRemoved.length} partitions of gone instances removed`,
      ...report.partitionsRemoved.map((arn) => `  removed ${arn}`),
      `${report.drift.length} drift items (see \`vpc-lease audit\`)`,
    ]);
    return 0;
  },
};
