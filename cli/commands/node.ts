import { LEASE_STATES, type Lease } from '../../shared/domain/lease.js';
import type { NodeRecord } from '../../shared/domain/node.js';
import { errorMessage } from '../../shared/errors.js';
import type { CliContext } from '../context.js';
import { table } from '../table.js';
import { type Command, checkInstanceId, findNode, isoOrDash, print } from './command.js';
import { type DeadEvent, describe, findDlq, peek } from './dlq.js';

/** How many releases the story shows: the most recent ones, by releasedAt. */
const RECENT_RELEASES = 10;

/** Why a lease left CLAIMED, from its state: a holder's DEL or GC leaves COOLDOWN; RELEASING is the pool's. */
function releaseReason(lease: Lease): string {
  if (lease.state === 'RELEASING') return 'pool-manager returning it to EC2 (excess over the high watermark)';
  if (lease.state === 'COOLDOWN') return 'released by its pod (CNI DEL or GC), reusable after the cooldown';
  return lease.state === 'FREE' ? 'free again' : 'claimed again since';
}

/** Phases in which a hooked launch still holds its instance in Pending:Wait. */
const HOLDING_PHASES = new Set(['PENDING', 'PROVISIONING']);

/**
 * How long the launch hook held the instance: from the node item's creation (the launch event's first arrival)
 * to the completion the launch recorded; while held, how long so far.
 */
function hookHold(node: NodeRecord, nowMs: number): { heldS: number | null; line: string } {
  if (!node.lifecycle) return { heldS: null, line: '- (launched without a lifecycle hook)' };
  if (node.hookCompletedAtMs !== undefined) {
    const heldS = Math.round((node.hookCompletedAtMs - node.createdAtMs) / 100) / 10;
    return { heldS, line: `${heldS} s (completed ${isoOrDash(node.hookCompletedAtMs)})` };
  }
  if (HOLDING_PHASES.has(node.phase))
    return { heldS: null, line: `still held (${Math.round((nowMs - node.createdAtMs) / 1000)} s so far)` };
  return { heldS: null, line: 'completion not recorded (completed by another invocation, or the hook expired)' };
}

/** The agent's own figures, from its /metrics (a local run records each agent's URL in state.json). */
async function agentMetrics(ctx: CliContext, instanceId: string): Promise<Record<string, number> | string> {
  const url = ctx.local?.nodes?.find((n) => n.instanceId === instanceId)?.metricsUrl;
  if (!url) return ctx.local ? 'no agent recorded for this node in the local state' : 'not a local run';
  try {
    const text = await (await fetch(url, { signal: AbortSignal.timeout(2000) })).text();
    const out: Record<string, number> = {};
    for (const line of text.split('\n')) {
      const m =
        /^(vpc_lease_(?:cni_requests_total|fallback_executions_total|node_leases|store_errors_total)\S*) (\S+)$/.exec(
          line,
        );
      if (m) out[m[1]!] = Number(m[2]);
    }
    return out;
  } catch (err) {
    return `cannot read ${url}: ${errorMessage(err)}`;
  }
}

export const nodeCommand: Command = {
  name: 'node',
  usage: 'vpc-lease node <instance-id> [--dlq QUEUE_URL]',
  summary: "one node's story: launch, ENIs, leases by state, recent releases, failures, DLQ entries, agent metrics",
  options: ['dlq'],
  positionals: [1, 1],
  async run(input) {
    const ctx = input.ctx();
    const instanceId = checkInstanceId(input.line.positionals[0]!);
    const node = await findNode(ctx, instanceId);
    const leases = await ctx.store().listLeases(node.instanceArn);
    const byState = Object.fromEntries(LEASE_STATES.map((s) => [s, leases.filter((l) => l.state === s).length]));
    const releases = leases
      .filter((l) => l.releasedAtMs !== undefined)
      .sort((a, b) => (b.releasedAtMs ?? 0) - (a.releasedAtMs ?? 0))
      .slice(0, RECENT_RELEASES)
      .map((l) => ({ ip: l.ip, state: l.state, releasedAt: isoOrDash(l.releasedAtMs), reason: releaseReason(l) }));
    let dead: readonly DeadEvent[] | string;
    try {
      const dlq = input.line.options.dlq;
      const queueUrl = await findDlq(ctx, typeof dlq === 'string' ? dlq : undefined);
      const events = await Promise.all((await peek(ctx, queueUrl)).map((m) => describe(ctx, m)));
      dead = events.filter((e) => e.instanceId === instanceId);
    } catch (err) {
      dead = `dead-letter queue not read: ${errorMessage(err)}`;
    }
    const hold = hookHold(node, Date.now());
    const story = {
      instanceId,
      instanceArn: node.instanceArn,
      instanceType: node.instanceType,
      availabilityZone: node.availabilityZone,
      phase: node.phase,
      failureReason: node.failureReason ?? null,
      launch: {
        lifecycleHook: node.lifecycle ? `${node.lifecycle.autoScalingGroupName}/${node.lifecycle.hookName}` : null,
        createdAt: isoOrDash(node.createdAtMs),
        updatedAt: isoOrDash(node.updatedAtMs),
        hookHeldS: hold.heldS,
        hookCompletedAt: node.hookCompletedAtMs === undefined ? null : isoOrDash(node.hookCompletedAtMs),
        maxPods: node.maxPods,
        podSubnetIds: node.podSubnetIds,
      },
      enis: node.enis.map((e) => ({
        deviceIndex: e.deviceIndex,
        eniId: e.eniId ?? null,
        step: e.step,
        subnetId: e.subnetId,
        planned: { addresses: e.plannedIpCount ?? 0, prefixes: e.plannedPrefixCount ?? 0 },
        addresses: e.addresses.length,
        prefixes: e.prefixes,
        deleteOnTermination: e.deleteOnTermination ?? null,
      })),
      leases: byState,
      recentReleases: releases,
      deadLetters: dead,
      agentMetrics: await agentMetrics(ctx, instanceId),
    };
    print(input, story, () => [
      `${instanceId} (${node.instanceType}, ${node.availabilityZone}) ${node.phase}${node.failureReason ? `: ${node.failureReason}` : ''}`,
      '',
      'Launch',
      `  hook         ${story.launch.lifecycleHook ?? '- (launched without a lifecycle hook)'}`,
      `  created      ${story.launch.createdAt}   last change ${story.launch.updatedAt}`,
      `  hook held    ${hold.line}`,
      `  max pods     ${node.maxPods}   pod subnets ${node.podSubnetIds.join(', ') || '-'}`,
      '',
      'ENIs (planned → now)',
      ...table(
        ['DEV', 'ENI', 'STEP', 'SUBNET', 'PLANNED', 'ADDRESSES', 'PREFIXES', 'DOT'],
        story.enis.map((e) => [
          String(e.deviceIndex),
          e.eniId ?? '-',
          e.step,
          e.subnetId,
          `${e.planned.addresses} ip, ${e.planned.prefixes} /28`,
          String(e.addresses),
          e.prefixes.join(' ') || '-',
          e.deleteOnTermination === null ? '-' : e.deleteOnTermination ? 'yes' : 'NO',
        ]),
      ).map((l) => `  ${l}`),
      '',
      `Leases  ${LEASE_STATES.map((s) => `${s} ${byState[s]}`).join('  ')}`,
      '',
      'Recent releases',
      ...(releases.length === 0
        ? ['  none']
        : table(
            ['IP', 'STATE', 'RELEASED', 'WHY'],
            releases.map((r) => [r.ip, r.state, r.releasedAt, r.reason]),
          ).map((l) => `  ${l}`)),
      '',
      'Failures and dead letters',
      `  node item    ${node.failureReason ?? 'no failure recorded'}`,
      ...(typeof dead === 'string'
        ? [`  ${dead}`]
        : dead.length === 0
          ? ['  no dead-letter event names this node']
          : dead.map((e) => `  ${e.sentAt ?? '-'}  ${e.transition ?? e.detailType}  ${e.lastError}`)),
      '',
      'Agent metrics',
      ...(typeof story.agentMetrics === 'string'
        ? [`  ${story.agentMetrics}`]
        : Object.entries(story.agentMetrics).map(([k, v]) => `  ${k} ${v}`)),
    ]);
    return 0;
  },
};
