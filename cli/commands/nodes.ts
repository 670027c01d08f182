import { LEASE_STATES } from '../../shared/domain/lease.js';
import type { NodeRecord } from '../../shared/domain/node.js';
import { table } from '../table.js';
import { type Command, isoOrDash, print } from './command.js';

interface NodeRow {
  readonly instanceId: string;
  readonly instanceArn: string;
  readonly instanceType: string;
  readonly availabilityZone: string;
  readonly phase: string;
  readonly failureReason?: string;
  readonly subnetRefusals?: NodeRecord['subnetRefusals'];
  readonly enis: readonly { deviceIndex: number; eniId: string | null; step: string }[];
  readonly leases: Readonly<Record<string, number>>;
  readonly maxPods: number;
  readonly updatedAt: string;
}

export const nodesCommand: Command = {
  name: 'nodes',
  usage: 'vpc-lease nodes',
  summary: 'node items: phase, ENIs, leases by state, max pods',
  options: [],
  positionals: [0, 0],
  async run(input) {
    const store = input.ctx().store();
    const nodes = (await store.listNodes()).sort((a, b) => a.createdAtMs - b.createdAtMs);
    const rows: NodeRow[] = [];
    for (const node of nodes) {
      const leases = await store.listLeases(node.instanceArn);
      const byState = Object.fromEntries(LEASE_STATES.map((s) => [s, leases.filter((l) => l.state === s).length]));
      rows.push({
        instanceId: node.instanceId,
        instanceArn: node.instanceArn,
        instanceType: node.instanceType,
        availabilityZone: node.availabilityZone,
        phase: node.phase,
        ...(node.failureReason ? { failureReason: node.failureReason } : {}),
        ...(node.subnetRefusals?.length ? { subnetRefusals: node.subnetRefusals } : {}),
        enis: node.enis.map((e) => ({ deviceIndex: e.deviceIndex, eniId: e.eniId ?? null, step: e.step })),
        leases: byState,
        maxPods: node.maxPods,
        updatedAt: isoOrDash(node.updatedAtMs),
      });
    }
    print(input, rows, () =>
      rows.length === 0
        ? ['no nodes']
        : table(
            [
              'INSTANCE',
              'TYPE',
              'AZ',
              'PHASE',
              'ENIS',
              'FREE',
              'CLAIMED',
              'COOLDOWN',
              'RELEASING',
              'MAX-PODS',
              'UPDATED',
            ],
            rows.map((r) => [
              r.instanceId,
              r.instanceType,
              r.availabilityZone,
              r.phase + (r.failureReason ? ` (${r.failureReason})` : ''),
              String(r.enis.filter((e) => e.eniId).length),
              String(r.leases['FREE']),
              String(r.leases['CLAIMED']),
              String(r.leases['COOLDOWN']),
              String(r.leases['RELEASING']),
              String(r.maxPods),
              r.updatedAt,
            ]),
          ),
    );
    return 0;
  },
};
