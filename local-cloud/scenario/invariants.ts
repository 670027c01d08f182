import { DynamoDBClient, GetItemCommand, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { instanceArn } from '../../shared/domain/arn.js';
import type { Ec2Port } from '../../shared/ec2/port.js';
import { checkInvariants } from '../../shared/invariants/checker.js';
import { A, type Item, leaseKey, nodeKey } from '../../shared/lease-store/item-codec.js';
import type { LeaseStore } from '../../shared/lease-store/port.js';
import type { LocalCloud } from '../cloud.js';
import type { InvariantKey } from './report.js';

export interface CheckAllInput {
  readonly ec2: Ec2Port;
  readonly store: LeaseStore;
  readonly clusterName: string;
  readonly minLeases: number;
  /** Invariant 1 as the workload saw it from the pods' side (workload.ts). */
  readonly workloadViolations: readonly string[];
  /** Lifecycle events that failed every delivery: a launch left to its hook's timeout (4). */
  readonly dlqMessages: number;
  /** Invariant 7: the cloud's IAM endpoint, the lease table and the nodes whose credentials are probed. */
  readonly iam: { readonly cloud: LocalCloud; readonly tableName: string; readonly instanceIds: readonly string[] };
}

export interface IamProbeResult {
  readonly violations: string[];
  /** Node requests IAM denied during the run, before the probes (the nodes' own work). */
  readonly deniedBeforeProbes: number;
  readonly probes: number;
}

type ProbeOutcome = 'allowed' | 'denied' | string;

async function outcome(send: () => Promise<unknown>): Promise<ProbeOutcome> {
  try {
    await send();
    return 'allowed';
  } catch (err) {
    const name = (err as Error).name;
    return name === 'AccessDeniedException' ? 'denied' : `failed (${name})`;
  }
}

/**
 * Invariant 7 observed through the IAM endpoint: with the credentials its own IMDS issued, each node reads its
 * own lease, and is refused another node's partition (read and write) and a write to its own node item. Before
 * the probes, no node request of the run may have been denied: the plugin never needs more than the policy.
 */
export async function probeIam(input: CheckAllInput['iam']): Promise<IamProbeResult> {
  const { cloud, tableName, instanceIds } = input;
  const deniedBeforeProbes = cloud.iam.counts.denied;
  const violations: string[] = [];
  if (deniedBeforeProbes > 0) {
    const seen = cloud.iam.denials.slice(0, 3).map((d) => `${d.principal} ${d.action} on ${d.resource}`);
    violations.push(`invariant 7: ${deniedBeforeProbes} node request(s) denied during the run (${seen.join('; ')})`);
  }
  let probes = 0;
  for (const [i, id] of instanceIds.entries()) {
    const session = cloud.nodeSession(id);
    // Another node's partition: the next node's, or (one node left) one IAM must refuse all the same.
    const next = instanceIds[(i + 1) % instanceIds.length]!;
    const otherArn =
      next !== id
        ? cloud.nodeSession(next).instanceArn
        : instanceArn(cloud.region, cloud.accountId, 'i-0ffffffffffffffff', cloud.partition);
    const ddb = new DynamoDBClient({
      region: cloud.region,
      endpoint: cloud.endpoints.dynamodb,
      credentials: session.credentials,
      maxAttempts: 1,
    });
    const set = (key: Item, attribute: string, value: string) => () =>
      ddb.send(
        new UpdateItemCommand({
          TableName: tableName,
          Key: key,
          UpdateExpression: 'SET #a = :v',
          ExpressionAttributeNames: { '#a': attribute },
          ExpressionAttributeValues: { ':v': { S: value } },
        }),
      );
    try {
      const checks: [string, ProbeOutcome, () => Promise<unknown>][] = [
        [
          'read another node’s item',
          'denied',
          () => ddb.send(new GetItemCommand({ TableName: tableName, Key: nodeKey(otherArn) })),
        ],
        ['write another node’s lease', 'denied', set(leaseKey(otherArn, '10.255.255.254'), A.state, 'FREE')],
        [
          'read its own node item',
          'allowed',
          () => ddb.send(new GetItemCommand({ TableName: tableName, Key: nodeKey(session.instanceArn) })),
        ],
        ['write its own node item', 'denied', set(nodeKey(session.instanceArn), A.phase, 'DRAINING')],
      ];
      for (const [what, expected, send] of checks) {
        probes += 1;
        const got = await outcome(send);
        if (got !== expected) violations.push(`invariant 7: ${id} may ${what}: expected ${expected}, got ${got}`);
      }
    } finally {
      ddb.destroy();
    }
  }
  return { violations, deniedBeforeProbes, probes };
}

export interface CheckAllResult {
  readonly invariants: Record<InvariantKey, boolean>;
  readonly violations: string[];
  readonly iam: IamSummary;
}

/** What invariant 7's check saw: node requests IAM allowed, those it denied during the run, and probes made. */
export interface IamSummary {
  readonly nodeRequestsAllowed: number;
  readonly deniedDuringRun: number;
  readonly probes: number;
}

/**
 * The invariants of DESIGN.md the local run can observe: 1 from the pods' side, 2–6 with the shared checker
 * (EC2 against the table, through the same ports the control plane uses), 4 also from the DLQ, 7 with
 * probes through the IAM endpoint.
 */
export async function checkAll(input: CheckAllInput): Promise<CheckAllResult> {
  const report = await checkInvariants(input.ec2, input.store, {
    clusterName: input.clusterName,
    minLeases: input.minLeases,
    nowMs: Date.now(),
    // A pool-manager ENI created but not yet attached is in flight, not leaked: the reconciler's bound.
    maxUnattachedAgeMs: 30_000,
    maxProvisioningMs: 60_000,
  });
  const iam = await probeIam(input.iam);
  const violations = [
    ...input.workloadViolations.map((m) => `invariant 1: ${m}`),
    ...report.violations.map((v) => `invariant ${v.invariant}: ${v.message}`),
    ...iam.violations,
  ];
  if (input.dlqMessages > 0)
    violations.push(`invariant 4: ${input.dlqMessages} lifecycle event(s) in the dead-letter queue`);
  const holds = (n: number): boolean => !violations.some((v) => v.startsWith(`invariant ${n}:`));
  return {
    invariants: {
      '1': holds(1),
      '2': holds(2),
      '3': holds(3),
      '4': holds(4),
      '5': holds(5),
      '6': holds(6),
      '7': holds(7),
    },
    violations,
    iam: {
      probes: iam.probes,
      deniedDuringRun: iam.deniedBeforeProbes,
      nodeRequestsAllowed: input.iam.cloud.iam.counts.allowed,
    },
  };
}
