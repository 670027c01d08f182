import { describe, expect, it } from 'vitest';
import type { Lease } from '../../shared/domain/lease.js';
import type { EniRecord, NodeRecord } from '../../shared/domain/node.js';
import type { Ec2Eni } from '../../shared/ec2/port.js';
import { ENI_TAGS } from '../../shared/ec2/tags.js';
import { detectDrift } from '../../shared/reconcile/drift.js';
import {
  decideEniGc,
  decideGoneNodes,
  decideStrayLeases,
  GC_MARK_TAG,
  GONE_RETENTION_MS,
  staleStrayMarks,
} from '../../shared/reconcile/gc-plan.js';

const NOW = Date.UTC(2026, 0, 1, 12);
const MIN_AGE = 600_000;
const iso = (ms: number): string => new Date(ms).toISOString();

function eni(id: string, extra: Partial<Ec2Eni> = {}, tags: Record<string, string> = {}): Ec2Eni {
  return {
    eniId: id,
    subnetId: 'subnet-1',
    vpcId: 'vpc-1',
    availabilityZone: 'us-east-1a',
    mac: '02:00:00:00:00:01',
    primaryIp: '10.0.0.5',
    secondaryIps: [],
    prefixes: [],
    status: 'available',
    securityGroupIds: [],
    tags: {
      [ENI_TAGS.cluster]: 'c',
      [ENI_TAGS.instance]: 'i-00000000000000001',
      [ENI_TAGS.createdAt]: iso(NOW - 2 * MIN_AGE),
      ...tags,
    },
    ...extra,
  };
}

function node(instanceId: string, extra: Partial<NodeRecord> = {}): NodeRecord {
  return {
    instanceArn: `arn:aws:ec2:us-east-1:123456789012:instance/${instanceId}`,
    instanceId,
    instanceType: 'm5.large',
    availabilityZone: 'us-east-1a',
    podSubnetIds: [],
    phase: 'READY',
    enis: [],
    maxPods: 110,
    createdAtMs: NOW - 2 * MIN_AGE,
    updatedAtMs: NOW - 2 * MIN_AGE,
    version: 1,
    ...extra,
  };
}

/** A pod ENI record as a READY node keeps it once leased. */
function leasedEni(eniId: string): EniRecord {
  return {
    deviceIndex: 1,
    networkCardIndex: 0,
    subnetId: 'subnet-1',
    clientToken: 't',
    step: 'LEASED',
    eniId,
    addresses: [],
    prefixes: [],
  };
}

const gc = (enis: Ec2Eni[], nodes: NodeRecord[] = [], states: [string, string][] = []) =>
  decideEniGc({
    nowMs: NOW,
    minEniAgeMs: MIN_AGE,
    minMarkAgeMs: 60_000,
    enis,
    nodes,
    instanceStates: new Map(states),
  }).map((d) => [d.eniId, d.action]);

describe('decideEniGc', () => {
  it('marks on the first pass and deletes on a later one', () => {
    expect(gc([eni('eni-a')])).toEqual([['eni-a', 'mark']]);
    expect(gc([eni('eni-a', {}, { [GC_MARK_TAG]: iso(NOW - 1_000) })])).toEqual([['eni-a', 'keep']]);
    expect(gc([eni('eni-a', {}, { [GC_MARK_TAG]: iso(NOW - 60_000) })])).toEqual([['eni-a', 'delete']]);
  });

  it('never touches an ENI that is attaching or in use, and drops its mark', () => {
    const attachment = {
      attachmentId: 'eni-attach-1',
      instanceId: 'i-00000000000000001',
      deviceIndex: 1,
      networkCardIndex: 0,
      status: 'attaching' as const,
      deleteOnTermination: false,
    };
    expect(gc([eni('eni-a', { status: 'in-use', attachment })])).toEqual([['eni-a', 'keep']]);
    expect(gc([eni('eni-b', { status: 'attaching' }, { [GC_MARK_TAG]: iso(NOW - 3_600_000) })])).toEqual([
      ['eni-b', 'unmark'],
    ]);
  });

  it('never touches an ENI younger than the minimum age', () => {
    expect(gc([eni('eni-a', {}, { [ENI_TAGS.createdAt]: iso(NOW - MIN_AGE + 1) })])).toEqual([['eni-a', 'keep']]);
  });

  it('counts the minimum age from the mark when the created-at tag is missing', () => {
    const untagged = (mark: number) => {
      const e = eni('eni-a', {}, { [GC_MARK_TAG]: iso(mark) });
      const { [ENI_TAGS.createdAt]: _, ...tags } = e.tags;
      return { ...e, tags };
    };
    expect(gc([untagged(NOW - 120_000)])).toEqual([['eni-a', 'keep']]);
    expect(gc([untagged(NOW - MIN_AGE)])).toEqual([['eni-a', 'delete']]);
  });

  it('spares the ENIs of a launch in progress, but not of one stalled past the minimum age', () => {
    const running: [string, string][] = [['i-00000000000000001', 'running']];
    expect(
      gc([eni('eni-a')], [node('i-00000000000000001', { phase: 'PROVISIONING', updatedAtMs: NOW - 1_000 })], running),
    ).toEqual([['eni-a', 'keep']]);
    expect(gc([eni('eni-a')], [node('i-00000000000000001', { phase: 'PROVISIONING' })], running)).toEqual([
      ['eni-a', 'mark'],
    ]);
  });

  it('reports instead of deleting an ENI a live node records as attached', () => {
    const n = node('i-00000000000000001', {
      enis: [leasedEni('eni-a')],
    });
    expect(gc([eni('eni-a')], [n], [['i-00000000000000001', 'running']])).toEqual([['eni-a', 'keep']]);
    expect(gc([eni('eni-a')], [n], [['i-00000000000000001', 'terminated']])).toEqual([['eni-a', 'mark']]);
  });
});

describe('decideGoneNodes', () => {
  const MARK_AGE = 60_000;
  const decide = (input: Omit<Parameters<typeof decideGoneNodes>[0], 'minMarkAgeMs'>) =>
    decideGoneNodes({ minMarkAgeMs: MARK_AGE, ...input });
  const ids = (decisions: ReturnType<typeof decideGoneNodes>, action: string): string[] =>
    decisions.filter((d) => d.action === action).map((d) => d.node.instanceId);

  it('marks nodes of terminated or unknown instances once past the minimum age, and removes none yet', () => {
    const nodes = [
      node('i-00000000000000001'),
      node('i-00000000000000002'),
      node('i-00000000000000003'),
      node('i-00000000000000004', { createdAtMs: NOW - 1_000 }),
      node('i-00000000000000005', { phase: 'DRAINING', updatedAtMs: NOW - 1_000 }),
    ];
    const states = new Map([
      ['i-00000000000000001', 'running'],
      ['i-00000000000000002', 'terminated'],
      ['i-00000000000000005', 'terminated'],
    ]);
    const gone = decide({ nowMs: NOW, minAgeMs: MIN_AGE, nodes, instanceStates: states });
    expect(ids(gone, 'mark')).toEqual(['i-00000000000000002', 'i-00000000000000003']);
    expect(ids(gone, 'remove')).toEqual([]);
  });

  it('removes only when a pass at least the mark age later still sees the instance gone', () => {
    const nodes = [
      node('i-00000000000000001', { goneSeenAtMs: NOW - MARK_AGE }),
      node('i-00000000000000002', { goneSeenAtMs: NOW - MARK_AGE + 1 }),
      // Briefly missing from one snapshot (eventual consistency): back now, so unmarked and kept.
      node('i-00000000000000003', { goneSeenAtMs: NOW - 10 * MARK_AGE }),
    ];
    const states = new Map([['i-00000000000000003', 'running']]);
    const decisions = decide({ nowMs: NOW, minAgeMs: MIN_AGE, nodes, instanceStates: states });
    expect(ids(decisions, 'remove')).toEqual(['i-00000000000000001']);
    expect(ids(decisions, 'unmark')).toEqual(['i-00000000000000003']);
    expect(decisions).toHaveLength(2); // the too-recent mark waits
  });

  it('keeps GONE items as the audit trail for the retention, counted from the terminate, then prunes them', () => {
    const terminatedAt = NOW - GONE_RETENTION_MS;
    const nodes = [
      // Created long ago, terminated a moment ago: kept, although its instance is long terminated.
      node('i-00000000000000001', { phase: 'GONE', createdAtMs: NOW - 30 * MIN_AGE, updatedAtMs: NOW - MIN_AGE }),
      node('i-00000000000000002', { phase: 'GONE', createdAtMs: terminatedAt - MIN_AGE, updatedAtMs: terminatedAt }),
      // A tombstone for a still-running instance (terminate hook before launch) goes after the retention too.
      node('i-00000000000000003', { phase: 'GONE', updatedAtMs: terminatedAt - 1 }),
    ];
    const states = new Map([
      ['i-00000000000000001', 'terminated'],
      ['i-00000000000000003', 'running'],
    ]);
    const gone = decide({ nowMs: NOW, minAgeMs: MIN_AGE, nodes, instanceStates: states });
    expect(ids(gone, 'remove')).toEqual(['i-00000000000000002', 'i-00000000000000003']);
    const shorter = decide({
      nowMs: NOW,
      minAgeMs: MIN_AGE,
      goneRetentionMs: MIN_AGE,
      nodes,
      instanceStates: states,
    });
    expect(shorter).toHaveLength(3);
  });
});

describe('decideStrayLeases', () => {
  const arn = (id: string): string => `arn:aws:ec2:us-east-1:123456789012:instance/${id}`;

  it('removes leases of GONE nodes at once, those without a node item only on a second look, and only reports live ones', () => {
    const nodes = [node('i-00000000000000001'), node('i-00000000000000002', { phase: 'GONE' })];
    const nowMs = 1_000_000;
    const strays = decideStrayLeases({
      nowMs,
      minMarkAgeMs: 60_000,
      leasePartitions: [
        arn('i-00000000000000001'), // a READY node's leases: fine
        arn('i-00000000000000002'), // leases after GONE
        arn('i-00000000000000003'), // no node item, instance terminated, first look
        arn('i-00000000000000004'), // no node item, instance unknown to EC2, first look
        arn('i-00000000000000005'), // no node item, instance running: a pod may hold one
        arn('i-00000000000000006'), // no node item, gone, marked long enough ago
        arn('i-00000000000000007'), // no node item, gone, marked too recently
        'not-an-arn',
      ],
      nodes,
      instanceStates: new Map([
        ['i-00000000000000001', 'running'],
        ['i-00000000000000002', 'terminated'],
        ['i-00000000000000003', 'terminated'],
        ['i-00000000000000005', 'running'],
        ['i-00000000000000006', 'terminated'],
      ]),
      strayMarks: new Map([
        [arn('i-00000000000000005'), nowMs - 120_000], // marked while it looked gone; it is back
        [arn('i-00000000000000006'), nowMs - 60_000],
        [arn('i-00000000000000007'), nowMs - 59_999],
        [arn('i-00000000000000008'), nowMs - 120_000], // its partition is gone
      ]),
    });
    expect(strays.map((s) => [s.instanceId, s.action, s.goneNode?.phase])).toEqual([
      ['i-00000000000000002', 'remove', 'GONE'],
      ['i-00000000000000003', 'mark', undefined],
      ['i-00000000000000004', 'mark', undefined],
      ['i-00000000000000005', 'report', undefined],
      ['i-00000000000000006', 'remove', undefined],
      ['i-00000000000000007', 'wait', undefined],
    ]);
    const marks = new Map([
      [arn('i-00000000000000005'), 0],
      [arn('i-00000000000000006'), 0],
      [arn('i-00000000000000007'), 0],
      [arn('i-00000000000000008'), 0],
    ]);
    expect(staleStrayMarks(strays, marks).sort()).toEqual([arn('i-00000000000000005'), arn('i-00000000000000008')]);
  });
});

describe('detectDrift', () => {
  const instanceId = 'i-00000000000000001';
  const n = node(instanceId, {
    enis: [leasedEni('eni-a')],
  });
  const attached = (id: string, secondaryIps: string[], tags: Record<string, string> = {}) =>
    eni(
      id,
      {
        status: 'in-use',
        secondaryIps,
        attachment: {
          attachmentId: `${id}-att`,
          instanceId,
          deviceIndex: 1,
          networkCardIndex: 0,
          status: 'attached',
          deleteOnTermination: true,
        },
      },
      tags,
    );
  const lease = (ip: string, state: Lease['state'] = 'FREE', createdAtMs = NOW - 3_600_000): Lease => ({
    instanceArn: n.instanceArn,
    ip,
    state,
    eniId: 'eni-a',
    deviceIndex: 1,
    mac: '02:00:00:00:00:01',
    subnetId: 'subnet-1',
    subnetCidr: '10.0.0.0/16',
    gateway: '10.0.0.1',
    createdAtMs,
    version: 1,
  });

  it('finds leases without addresses, addresses without leases, and ENIs without nodes', () => {
    const drift = detectDrift({
      nowMs: NOW,
      graceMs: 60_000,
      nodes: [n],
      leasesByNode: new Map([
        [
          n.instanceArn,
          [
            lease('10.0.0.10'),
            lease('10.0.0.11'),
            lease('10.0.0.12', 'RELEASING'),
            lease('10.0.0.13', 'FREE', NOW - 1_000),
          ],
        ],
      ]),
      enis: [
        attached('eni-a', ['10.0.0.10', '10.0.0.20']),
        {
          ...attached('eni-x', ['10.0.0.30'], { [ENI_TAGS.instance]: 'i-00000000000000009' }),
          attachment: {
            attachmentId: 'x',
            instanceId: 'i-00000000000000009',
            deviceIndex: 1,
            networkCardIndex: 0,
            status: 'attached',
            deleteOnTermination: true,
          },
        },
      ],
      instanceStates: new Map([
        [instanceId, 'running'],
        ['i-00000000000000009', 'running'],
      ]),
    });
    expect(drift.map((d) => [d.kind, d.address ?? d.eniId]).sort()).toEqual(
      [
        ['address-without-lease', '10.0.0.20'],
        ['eni-without-node', 'eni-x'],
        ['lease-without-address', '10.0.0.11'],
      ].sort(),
    );
  });

  it("checks IPv6 leases against the ENI's /80 and IPv6 addresses", () => {
    const v6 = (ip: string): Lease => ({ ...lease(ip), subnetCidr: '2600:1f18::/64', gateway: '2600:1f18::1' });
    const withV6: Ec2Eni = {
      ...attached('eni-a', ['10.0.0.10']),
      ipv6Prefixes: ['2600:1f18:0:0:8c3e::/80'],
      ipv6Addresses: ['2600:1f18::77'],
    };
    const drift = detectDrift({
      nowMs: NOW,
      graceMs: 60_000,
      nodes: [n],
      leasesByNode: new Map([
        [
          n.instanceArn,
          [lease('10.0.0.10'), v6('2600:1f18::8c3e:0:0:1'), v6('2600:1f18::77'), v6('2600:1f18::8c3f:0:0:1')],
        ],
      ]),
      enis: [withV6],
      instanceStates: new Map([[instanceId, 'running']]),
    });
    expect(drift.map((d) => [d.kind, d.address])).toEqual([['lease-without-address', '2600:1f18::8c3f:0:0:1']]);
  });

  it('reports a /80 no lease names, and every IPv6 lease of a /80 gone from its ENI', () => {
    const v6 = (ip: string): Lease => ({
      ...lease(ip),
      subnetCidr: '2600:1f18::/64',
      gateway: '2600:1f18::1',
      prefix: '2600:1f18:0:0:8c3e::/80',
    });
    const judge = (ipv6Prefixes: string[], leases: Lease[]) =>
      detectDrift({
        nowMs: NOW,
        graceMs: 60_000,
        nodes: [n],
        leasesByNode: new Map([[n.instanceArn, [lease('10.0.0.10'), ...leases]]]),
        enis: [{ ...attached('eni-a', ['10.0.0.10']), ipv6Prefixes }],
        instanceStates: new Map([[instanceId, 'running']]),
      }).map((d) => [d.kind, d.address]);
    const leased = [v6('2600:1f18::8c3e:0:0:1'), v6('2600:1f18::8c3e:0:0:2')];
    expect(judge(['2600:1f18:0:0:8c3e::/80'], leased)).toEqual([]);
    expect(judge(['2600:1f18:0:0:8c3e::/80'], [])).toEqual([['address-without-lease', '2600:1f18:0:0:8c3e::/80']]);
    expect(judge([], leased)).toEqual([
      ['lease-without-address', '2600:1f18::8c3e:0:0:1'],
      ['lease-without-address', '2600:1f18::8c3e:0:0:2'],
    ]);
  });

  it('checks launch-template ENIs by their attachment (no instance tag), but never the template-tagged boot ENI', () => {
    const template = { [ENI_TAGS.owner]: 'launch-template' };
    const adopted = { ...attached('eni-a', ['10.0.0.10', '10.0.0.21'], template) };
    const { [ENI_TAGS.instance]: _none, ...untagged } = adopted.tags;
    const boot = attached('eni-boot', ['10.0.0.99'], template);
    const drift = detectDrift({
      nowMs: NOW,
      graceMs: 60_000,
      nodes: [n],
      leasesByNode: new Map([[n.instanceArn, [lease('10.0.0.10')]]]),
      enis: [
        { ...adopted, tags: untagged },
        { ...boot, tags: untagged, attachment: { ...boot.attachment!, deviceIndex: 0 } },
      ],
      instanceStates: new Map([[instanceId, 'running']]),
    });
    expect(drift.map((d) => [d.kind, d.address])).toEqual([['address-without-lease', '10.0.0.21']]);
  });

  it('finds a recorded ENI that EC2 shows detached', () => {
    const drift = detectDrift({
      nowMs: NOW,
      graceMs: 60_000,
      nodes: [n],
      leasesByNode: new Map(),
      enis: [eni('eni-a')],
      instanceStates: new Map([[instanceId, 'running']]),
    });
    expect(drift).toEqual([{ kind: 'eni-detached', instanceId, eniId: 'eni-a' }]);
  });
});
