import { controlPlaneConfigFromEnv } from '../../shared/config/control-plane.js';
import type { Lease } from '../../shared/domain/lease.js';
import { ENI_TAGS } from '../../shared/ec2/tags.js';
import { checkInvariants } from '../../shared/invariants/checker.js';
import { detectDrift } from '../../shared/reconcile/drift.js';
import { SdkReconcileEc2 } from '../../shared/reconcile/ec2.js';
import { DEFAULT_DRIFT_GRACE_MS } from '../../shared/reconcile/reconciler.js';
import { EXIT } from '../errors.js';
import { table } from '../table.js';
import { type Command, print } from './command.js';

/**
 * EC2 against the lease table, read-only: the reconciler's drift detection (shared/reconcile/drift.ts) and the
 * invariant checker (shared/invariants/checker.ts) on one snapshot. Non-zero exit when either finds anything,
 * so it can gate a script or a cron job.
 */
export const auditCommand: Command = {
  name: 'audit',
  usage: 'vpc-lease audit [--cluster NAME]',
  summary: 'drift between EC2 and the lease table; exit code 1 when there is any',
  options: [],
  positionals: [0, 0],
  async run(input) {
    const ctx = input.ctx();
    const store = ctx.store();
    const ec2 = ctx.ec2();
    const nowMs = Date.now();
    const enis = await ec2.describeNetworkInterfaces({ tags: { [ENI_TAGS.cluster]: ctx.clusterName } });
    const nodes = await store.listNodes();
    const ids = new Set(nodes.map((n) => n.instanceId));
    for (const e of enis) if (e.attachment?.instanceId) ids.add(e.attachment.instanceId);
    const instanceStates = await new SdkReconcileEc2(ec2).describeInstanceStates([...ids]);
    const leasesByNode = new Map<string, readonly Lease[]>();
    for (const n of nodes) leasesByNode.set(n.instanceArn, await store.listLeases(n.instanceArn));
    const drift = detectDrift({
      nowMs,
      graceMs: DEFAULT_DRIFT_GRACE_MS,
      nodes,
      leasesByNode,
      enis,
      instanceStates,
    });
    const invariants = await checkInvariants(ec2, store, {
      clusterName: ctx.clusterName,
      // The same VPC_LEASE_MIN_LEASES the Lambdas read (default 8): a READY node below it breaks invariant 4.
      minLeases: controlPlaneConfigFromEnv(input.io.env).minLeases,
      nowMs,
      // Collected by the reconciler after its minimum age and two passes: only older ones are leaks.
      maxUnattachedAgeMs: 15 * 60_000,
      maxProvisioningMs: 15 * 60_000,
    });
    const clean = drift.length === 0 && invariants.violations.length === 0;
    print(input, { clean, counts: invariants.counts, drift, violations: invariants.violations }, () => [
      `checked ${invariants.counts.nodes} nodes, ${invariants.counts.leases} leases, ${invariants.counts.enis} ENIs of cluster ${ctx.clusterName}`,
      ...(drift.length > 0
        ? [
            '',
            `Drift (${drift.length})`,
            ...table(
              ['KIND', 'INSTANCE', 'ENI', 'ADDRESS'],
              drift.map((d) => [d.kind, d.instanceId, d.eniId, d.address ?? '-']),
            ).map((l) => `  ${l}`),
          ]
        : []),
      ...(invariants.violations.length > 0
        ? [
            '',
            `Invariant violations (${invariants.violations.length})`,
            ...invariants.violations.map((v) => `  invariant ${v.invariant}: ${v.message}`),
          ]
        : []),
      clean
        ? 'no drift'
        : `drift found: ${drift.length} drift items, ${invariants.violations.length} invariant violations`,
    ]);
    return clean ? EXIT.ok : EXIT.negative;
  },
};
