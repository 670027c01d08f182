import type { Ec2Port } from '../../shared/ec2/port.js';
import { ENI_TAGS } from '../../shared/ec2/tags.js';
import type { LeaseStore } from '../../shared/lease-store/port.js';
import type { ReconcileReport } from '../../shared/reconcile/reconciler.js';
import type { ActionCounts } from '../ec2/index.js';
import type { Deployment } from './deploy.js';
import type { HostNet } from './host-net.js';
import type { CheckAllResult } from './invariants.js';
import type { ScenarioNodes } from './node-group.js';
import type { ScenarioOptions } from './options.js';
import type { PodDriver } from './pods.js';
import { type NodeLine, type ScenarioReport, summarize } from './report.js';
import type { Workload } from './workload.js';

export interface ReportInput {
  readonly options: ScenarioOptions;
  readonly startedMs: number;
  readonly clusterName: string;
  readonly store: LeaseStore;
  readonly ec2: Ec2Port;
  /** The EC2 simulator's counts, taken before the final checks added their own Describe calls. */
  readonly ec2Counts: Readonly<Record<string, ActionCounts>>;
  readonly deployment: Deployment;
  readonly group: ScenarioNodes;
  readonly workload: Workload;
  readonly driver: PodDriver;
  readonly datapathReason: string | null;
  readonly hostNet: HostNet;
  readonly reconcile: ReconcileReport;
  readonly checked: CheckAllResult;
}

/** The final figures, read back from the table and EC2 as an operator would see them. */
export async function buildReport(input: ReportInput): Promise<ScenarioReport> {
  const { options, store, workload, deployment, reconcile, checked } = input;
  const leasesByState: Record<string, number> = { FREE: 0, CLAIMED: 0, COOLDOWN: 0, RELEASING: 0 };
  const nodes: NodeLine[] = [];
  for (const n of await store.listNodes()) {
    const leases = await store.listLeases(n.instanceArn);
    for (const l of leases) leasesByState[l.state] = (leasesByState[l.state] ?? 0) + 1;
    nodes.push({
      instanceId: n.instanceId,
      instanceType: n.instanceType,
      availabilityZone: n.availabilityZone,
      phase: n.phase,
      enis: n.enis.filter((e) => e.eniId).length,
      leases: leases.length,
      claimed: leases.filter((l) => l.state === 'CLAIMED').length,
      maxPods: n.maxPods,
    });
  }
  const enis = await input.ec2.describeNetworkInterfaces({ tags: { [ENI_TAGS.cluster]: input.clusterName } });
  const dlq = deployment.dlq.counts();
  return {
    ok: Object.values(checked.invariants).every(Boolean) && workload.addFailures === 0 && workload.delFailures === 0,
    durationMs: Date.now() - input.startedMs,
    settings: {
      nodes: options.nodes,
      pods: options.pods,
      instanceType: options.instanceType,
      prefixDelegation: options.prefixDelegation,
      podSubnet: options.podSubnet ?? null,
      churnRounds: options.churnRounds,
      parallel: options.parallel,
      timeScale: options.timeScale,
      sqsDuplicateRate: options.duplicateRate,
      hookless: options.hookless,
    },
    datapath: {
      mode: input.driver.kind,
      podLinkKind: input.driver.kind === 'cni' ? input.hostNet.linkKind : null,
      reason: input.datapathReason,
    },
    nodes,
    enis: { total: enis.length, attached: enis.filter((e) => e.attachment?.status === 'attached').length },
    leasesByState,
    ec2CallsByAction: Object.fromEntries(Object.entries(input.ec2Counts).map(([a, c]) => [a, c.calls])),
    ec2Throttled: Object.values(input.ec2Counts).reduce((s, c) => s + c.throttled, 0),
    lifecycle: {
      launchLabel: input.group.launchLabel,
      launch: summarize(input.group.launchMs),
      terminate: summarize(input.group.terminateMs),
    },
    cni: {
      add: summarize(workload.addMs, workload.addFailures),
      del: summarize(workload.delMs, workload.delFailures),
    },
    agents: (await input.driver.agentLines?.()) ?? [],
    pods: { started: workload.started, deleted: workload.deleted, running: workload.running.size },
    reconcile: {
      marked: reconcile.marked.length,
      deleted: reconcile.deleted.length,
      partitionsRemoved: reconcile.partitionsRemoved.length,
      drift: reconcile.drift.length,
    },
    dlqMessages: dlq.visible + dlq.inFlight,
    lifecycleInvocations: deployment.mapping.stats().invocations,
    invariants: checked.invariants,
    iam: checked.iam,
    violations: checked.violations,
    errors: workload.errors,
    notChecked: {},
    cleanup: { ...input.hostNet.counts, done: false },
  };
}
