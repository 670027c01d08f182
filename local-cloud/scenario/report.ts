import { table } from '../../cli/table.js';
import type { AgentLine } from './node-agents.js';

/** The final report of `npm start`: printed as text for people, or as one JSON object with `--json`. */
export interface LatencySummary {
  readonly count: number;
  readonly failed: number;
  readonly p50Ms: number | null;
  readonly p90Ms: number | null;
  readonly maxMs: number | null;
}

export interface NodeLine {
  readonly instanceId: string;
  readonly instanceType: string;
  readonly availabilityZone: string;
  readonly phase: string;
  readonly enis: number;
  readonly leases: number;
  readonly claimed: number;
  readonly maxPods: number;
}

/** DESIGN.md invariants by number; 7 through the local cloud's IAM endpoint. */
export type InvariantKey = '1' | '2' | '3' | '4' | '5' | '6' | '7';

export interface ScenarioReport {
  readonly ok: boolean;
  readonly durationMs: number;
  readonly settings: {
    readonly nodes: number;
    readonly pods: number;
    readonly instanceType: string;
    readonly prefixDelegation: boolean;
    readonly podSubnet: string | null;
    readonly churnRounds: number;
    readonly parallel: number;
    readonly timeScale: number;
    readonly sqsDuplicateRate: number;
    /** Nodes from RunInstances with the cluster tag, no group or hook. */
    readonly hookless: boolean;
  };
  readonly datapath: {
    readonly mode: 'cni' | 'lease-store';
    /** The pod link kind the plugin made (macvlan stands in where the kernel has no ipvlan). */
    readonly podLinkKind: 'ipvlan' | 'macvlan' | null;
    /** Why the CNI datapath did not run, when it did not. */
    readonly reason: string | null;
  };
  readonly nodes: readonly NodeLine[];
  readonly enis: { readonly total: number; readonly attached: number };
  readonly leasesByState: Readonly<Record<string, number>>;
  readonly ec2CallsByAction: Readonly<Record<string, number>>;
  readonly ec2Throttled: number;
  readonly lifecycle: {
    /** What the launch latency measures: from the hook's event, or from EC2's pending event without one. */
    readonly launchLabel: string;
    readonly launch: LatencySummary;
    readonly terminate: LatencySummary;
  };
  /** CNI ADD/DEL as processes; in `lease-store` mode the plugin's store calls alone (claim, release). */
  readonly cni: { readonly add: LatencySummary; readonly del: LatencySummary };
  /** In `cni` mode, each node's agent (the calls went shim → agent) and what its /metrics counted. */
  readonly agents: readonly AgentLine[];
  readonly pods: { readonly started: number; readonly deleted: number; readonly running: number };
  readonly reconcile: {
    readonly marked: number;
    readonly deleted: number;
    readonly partitionsRemoved: number;
    readonly drift: number;
  };
  readonly dlqMessages: number;
  readonly lifecycleInvocations: number;
  readonly invariants: Readonly<Record<InvariantKey, boolean>>;
  /** Invariant 7's evidence: node requests IAM allowed and denied during the run, and the probes made after. */
  readonly iam: {
    readonly nodeRequestsAllowed: number;
    readonly deniedDuringRun: number;
    readonly probes: number;
  };
  readonly violations: readonly string[];
  /** Pod calls that failed (CNI errors), which make the run fail without breaking an invariant. */
  readonly errors: readonly string[];
  readonly notChecked: Readonly<Record<string, string>>;
  /** Namespaces and host links the run made: removed (`done`), or still there under `--keep`. */
  readonly cleanup: { readonly links: number; readonly namespaces: number; readonly done: boolean };
}

export function summarize(samplesMs: readonly number[], failed = 0): LatencySummary {
  const sorted = [...samplesMs].sort((a, b) => a - b);
  // Nearest-rank percentile: an actual sample, never an interpolation between two.
  const rank = (p: number): number | null =>
    sorted.length === 0 ? null : round(sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)] ?? 0);
  return {
    count: sorted.length,
    failed,
    p50Ms: rank(0.5),
    p90Ms: rank(0.9),
    maxMs: sorted.length === 0 ? null : round(sorted[sorted.length - 1] ?? 0),
  };
}

function round(ms: number): number {
  return Math.round(ms * 10) / 10;
}

const ms = (v: number | null): string => (v === null ? '-' : v >= 1000 ? `${(v / 1000).toFixed(2)} s` : `${v} ms`);

function latencyLine(name: string, s: LatencySummary): string {
  return `  ${name.padEnd(18)} n=${String(s.count).padEnd(4)} p50 ${ms(s.p50Ms).padEnd(9)} p90 ${ms(s.p90Ms).padEnd(9)} max ${ms(s.maxMs)}${s.failed ? `  (${s.failed} failed)` : ''}`;
}

export function renderReport(r: ScenarioReport): string {
  const out: string[] = [];
  out.push(`vpc-lease local run: ${r.ok ? 'OK' : 'FAILED'} in ${(r.durationMs / 1000).toFixed(1)} s`);
  const dp =
    r.datapath.mode === 'cni'
      ? `real CNI binary in network namespaces (pod links: ${r.datapath.podLinkKind}${r.datapath.podLinkKind === 'macvlan' ? ', standing in for ipvlan, which this kernel lacks' : ''})`
      : `control plane only, pods claimed on the lease store (${r.datapath.reason})`;
  out.push(`datapath: ${dp}`);
  out.push('');
  out.push(`Nodes (${r.nodes.length})`);
  for (const l of table(
    ['INSTANCE', 'TYPE', 'AZ', 'PHASE', 'ENIS', 'LEASES', 'CLAIMED', 'MAX-PODS'],
    r.nodes.map((n) => [
      n.instanceId,
      n.instanceType,
      n.availabilityZone,
      n.phase,
      String(n.enis),
      String(n.leases),
      String(n.claimed),
      String(n.maxPods),
    ]),
  ))
    out.push(`  ${l}`);
  out.push('');
  out.push(`ENIs: ${r.enis.total} tagged for the cluster, ${r.enis.attached} attached`);
  out.push(
    `Leases: ${Object.entries(r.leasesByState)
      .map(([s, n]) => `${s} ${n}`)
      .join(', ')}`,
  );
  out.push(`Pods: ${r.pods.started} started, ${r.pods.deleted} deleted, ${r.pods.running} running`);
  const calls = Object.entries(r.ec2CallsByAction).sort(([a], [b]) => a.localeCompare(b));
  out.push(
    `EC2 calls (${calls.reduce((s, [, n]) => s + n, 0)}, ${r.ec2Throttled} throttled): ${calls.map(([a, n]) => `${a} ${n}`).join(', ')}`,
  );
  out.push(`Lifecycle handler invocations: ${r.lifecycleInvocations}; DLQ messages: ${r.dlqMessages}`);
  out.push(
    `IAM (node policy from the synthesized template): ${r.iam.nodeRequestsAllowed} node requests allowed, ${r.iam.deniedDuringRun} denied during the run, ${r.iam.probes} probes`,
  );
  out.push(
    `Reconcile: ${r.reconcile.marked} ENIs marked, ${r.reconcile.deleted} deleted, ${r.reconcile.partitionsRemoved} partitions removed, ${r.reconcile.drift} drift items`,
  );
  out.push('');
  out.push(
    `Latencies (EC2 and Auto Scaling delays at ${r.settings.timeScale}× AWS's; ${r.settings.parallel} pod calls in flight)`,
  );
  out.push(latencyLine(r.lifecycle.launchLabel, r.lifecycle.launch));
  out.push(latencyLine('terminate→GONE', r.lifecycle.terminate));
  const cni = r.datapath.mode === 'cni';
  const via = r.agents.length > 0 ? ' → agent' : '';
  out.push(latencyLine(cni ? `CNI ADD${via}` : 'store claim', r.cni.add));
  out.push(latencyLine(cni ? `CNI DEL${via}` : 'store release', r.cni.del));
  if (r.agents.length > 0) out.push(agentsLine(r.agents));
  out.push('');
  out.push('Invariants (DESIGN.md)');
  for (const [k, v] of Object.entries(r.invariants))
    out.push(`  ${k}. ${v ? 'ok' : 'VIOLATED'}  ${INVARIANT_NAMES[k as InvariantKey]}`);
  for (const [k, why] of Object.entries(r.notChecked)) out.push(`  ${k}. not checked: ${why}`);
  for (const v of r.violations) out.push(`  ! ${v}`);
  if (r.errors.length > 0) out.push('', `Errors (${r.errors.length})`, ...r.errors.map((e) => `  ${e}`));
  out.push(
    r.cleanup.done
      ? `Cleanup: ${r.cleanup.namespaces} namespaces and ${r.cleanup.links} host links removed`
      : `Kept: ${r.cleanup.namespaces} pod namespaces and ${r.cleanup.links} host links stay until Ctrl-C`,
  );
  return out.join('\n');
}

/** What the agents' own /metrics counted: every call served by an agent, or how many fell back. */
function agentsLine(agents: readonly AgentLine[]): string {
  const sum = (pick: (a: AgentLine) => number) => agents.reduce((s, a) => s + pick(a), 0);
  return `  agents: ${agents.length} (one per node) counted ADD ${sum((a) => a.add)}/${sum((a) => a.sent.add)} sent, DEL ${sum((a) => a.del)}/${sum((a) => a.sent.del)}; ${sum((a) => a.viaAgent)} ran in the agent, ${sum((a) => a.fallback)} fell back to the plugin`;
}

export const INVARIANT_NAMES: Record<InvariantKey, string> = {
  '1': 'one holder per address; a repeated ADD returns the same address',
  '2': 'every non-RELEASING lease is assigned to its ENI in EC2',
  '3': 'every ENI is tagged and attached with DeleteOnTermination, or collected',
  '4': 'every launch completed (CONTINUE), none left to time out',
  '5': 'no extra ENI, no lost lease under duplicated events',
  '6': 'addresses leave a node only through RELEASING; a gone node keeps no lease',
  '7': 'node credentials reach only their own partition (IAM endpoint probes; no node request denied)',
};
