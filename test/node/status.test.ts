import { describe, expect, it } from 'vitest';
import { judgeStatus, type StatusFacts, type StoreProbe } from '../../node/plugin/status.js';
import type { NodePhase, NodeRecord } from '../../shared/domain/node.js';

const NOW = 1_800_000_000_000;

function node(phase: NodePhase, failureReason?: string): NodeRecord {
  return {
    instanceArn: 'arn:aws:ec2:us-east-1:123456789012:instance/i-0123456789abcdef0',
    instanceId: 'i-0123456789abcdef0',
    instanceType: 'm5.large',
    availabilityZone: 'us-east-1a',
    podSubnetIds: [],
    phase,
    ...(failureReason ? { failureReason } : {}),
    enis: [],
    maxPods: 29,
    createdAtMs: NOW - 600_000,
    updatedAtMs: NOW - 60_000,
    version: 3,
  };
}

const answered = (n: NodeRecord | undefined): StoreProbe => ({ kind: 'answered', node: n });
const unreachable: StoreProbe = { kind: 'unreachable', error: 'connect ECONNREFUSED 127.0.0.1:9' };

const refused: StoreProbe = { kind: 'refused', error: 'ResourceNotFoundException: Requested resource not found' };

function facts(extra: Partial<StatusFacts>): StatusFacts {
  return { nowMs: NOW, readyThisBoot: true, store: answered(node('READY')), ...extra };
}

const fresh = { readyThisBoot: false };

describe('judgeStatus: 50 only for causes local to the node', () => {
  // Each cause beside its opposite: the same store answer on a node READY in this boot and on one never READY.
  it.each<[string, Partial<StatusFacts>, RegExp | undefined]>([
    ['a READY node whose store answers', {}, undefined],
    ['a READY node on a fresh boot (this STATUS records it)', { ...fresh }, undefined],
    ['a READY node with credentials that expire later', { credentialsExpireAtMs: NOW + 1 }, undefined],
    [
      'no identity (IMDS down, nothing cached)',
      { identityError: 'IMDS timed out', store: undefined },
      /no instance identity: IMDS timed out/,
    ],
    ['credentials that have expired', { credentialsExpireAtMs: NOW }, /credentials expired/],
    ['an unreachable store, READY this boot', { store: unreachable }, undefined],
    [
      'an unreachable store, never READY this boot',
      { ...fresh, store: unreachable },
      /not been seen READY since this boot, and the lease store is unreachable/,
    ],
    ['a refusing store (wrong table), READY this boot', { store: refused }, undefined],
    [
      'a refusing store (wrong table), never READY this boot',
      { ...fresh, store: refused },
      /not been seen READY.*refused the request: ResourceNotFoundException/,
    ],
    [
      'no node item, never READY this boot (hook-less launch)',
      { ...fresh, store: answered(undefined) },
      /not provisioned yet: no node item/,
    ],
    ['no node item after READY this boot (another table of that name)', { store: answered(undefined) }, undefined],
    ['a PENDING node', { ...fresh, store: answered(node('PENDING')) }, /not provisioned yet \(phase PENDING\)/],
    ['a PROVISIONING node', { ...fresh, store: answered(node('PROVISIONING')) }, /phase PROVISIONING/],
    ['a DRAINING node, even READY earlier this boot', { store: answered(node('DRAINING')) }, /the node is DRAINING/],
    ['a GONE node', { store: answered(node('GONE')) }, /the node is GONE/],
    ['a FAILED node', { store: answered(node('FAILED', 'subnet full')) }, /failed provisioning: subnet full/],
  ])('%s', (_name, extra, expected) => {
    const verdict = judgeStatus(facts(extra));
    if (expected === undefined) expect(verdict.unavailable).toBeUndefined();
    else expect(verdict.unavailable).toMatch(expected);
  });

  it('says why a node stays ready while its store fails (the log line for operators)', () => {
    expect(judgeStatus(facts({ store: unreachable })).degraded).toMatch(
      /lease store is unreachable: connect ECONNREFUSED/,
    );
    expect(judgeStatus(facts({})).degraded).toBeUndefined();
  });
});
