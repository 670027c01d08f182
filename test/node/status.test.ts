import { describe, expect, it } from 'vitest';
import { type StatusFacts, type StoreProbe, unavailableReason } from '../../node/plugin/status.js';
import type { NodePhase, NodeRecord } from '../../shared/domain/node.js';

const NOW = 1_800_000_000_000;
const GRACE = 120_000;

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

function facts(extra: Partial<StatusFacts>): StatusFacts {
  return { nowMs: NOW, graceMs: GRACE, store: answered(node('READY')), ...extra };
}

describe('unavailableReason', () => {
  it.each<[string, Partial<StatusFacts>, RegExp | undefined]>([
    ['a READY node whose store answers', {}, undefined],
    ['a READY node with credentials that expire later', { credentialsExpireAtMs: NOW + 1 }, undefined],
    [
      'no identity (IMDS down, nothing cached)',
      { identityError: 'IMDS timed out', store: undefined },
      /no instance identity: IMDS timed out/,
    ],
    ['credentials that have expired', { credentialsExpireAtMs: NOW }, /credentials expired/],
    [
      'a store that refuses the credentials',
      { store: { kind: 'refused', error: 'UnrecognizedClientException' } },
      /refused the node: UnrecognizedClientException/,
    ],
    ['an unreachable store that answered 10 s ago', { store: unreachable, storeOkAtMs: NOW - 10_000 }, undefined],
    ['an unreachable store exactly at the grace limit', { store: unreachable, storeOkAtMs: NOW - GRACE }, undefined],
    [
      'an unreachable store past the grace period',
      { store: unreachable, storeOkAtMs: NOW - GRACE - 1 },
      /unreachable for 120 s \(grace 120 s\)/,
    ],
    ['an unreachable store that never answered', { store: unreachable }, /never reached/],
    [
      'an unreachable store whose last answer is in the future (clock stepped back)',
      { store: unreachable, storeOkAtMs: NOW + 5_000 },
      /last answer is dated in the future/,
    ],
    [
      'no node item (hook-less launch not provisioned yet)',
      { store: answered(undefined) },
      /not provisioned yet: no node item/,
    ],
    ['a PENDING node', { store: answered(node('PENDING')) }, /not provisioned yet \(phase PENDING\)/],
    ['a PROVISIONING node', { store: answered(node('PROVISIONING')) }, /phase PROVISIONING/],
    ['a DRAINING node', { store: answered(node('DRAINING')) }, /the node is DRAINING/],
    ['a GONE node', { store: answered(node('GONE')) }, /the node is GONE/],
    ['a FAILED node', { store: answered(node('FAILED', 'subnet full')) }, /failed provisioning: subnet full/],
  ])('%s', (_name, extra, expected) => {
    const reason = unavailableReason(facts(extra));
    if (expected === undefined) expect(reason).toBeUndefined();
    else expect(reason).toMatch(expected);
  });
});
