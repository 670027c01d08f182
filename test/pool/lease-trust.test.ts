import { describe, expect, it } from 'vitest';
import { type Lease, MAX_CONTAINER_ID_CHARS } from '../../shared/domain/lease.js';
import { impossibility, MAX_CLOCK_SKEW_MS, MAX_HOLDER_FIELD_CHARS } from '../../shared/pool/lease-trust.js';

const NOW = Date.UTC(2026, 0, 1);
const REUSE_WAIT_MS = 30_000;

const lease = (overrides: Partial<Lease> = {}): Lease => ({
  instanceArn: 'arn:aws:ec2:us-east-1:123456789012:instance/i-0123456789abcdef0',
  ip: '10.0.0.10',
  state: 'FREE',
  eniId: 'eni-0123456789abcdef0',
  deviceIndex: 1,
  mac: '02:00:00:00:00:01',
  subnetId: 'subnet-0123456789abcdef0',
  subnetCidr: '10.0.0.0/20',
  gateway: '10.0.0.1',
  createdAtMs: NOW - 1000,
  reusableAtMs: NOW - 1000,
  version: 3,
  ...overrides,
});
const holder = { containerId: 'c1', ifName: 'eth0', netns: '/var/run/netns/c1' };

describe('impossibility', () => {
  it.each<[string, Partial<Lease>]>([
    ['a FREE lease', {}],
    ['a CLAIMED lease with its holder', { state: 'CLAIMED', holder, claimedAtMs: NOW }],
    ['a COOLDOWN lease reusable after the cooldown', { state: 'COOLDOWN', reusableAtMs: NOW + REUSE_WAIT_MS }],
    ['a clock a little ahead', { createdAtMs: NOW + MAX_CLOCK_SKEW_MS }],
    [
      'a container id as long as the node plugin takes',
      { state: 'CLAIMED', holder: { ...holder, containerId: 'c'.repeat(MAX_CONTAINER_ID_CHARS) }, claimedAtMs: NOW },
    ],
  ])('accepts %s', (_, overrides) => {
    expect(impossibility(lease(overrides), NOW, REUSE_WAIT_MS)).toBeUndefined();
  });

  it.each<[string, Partial<Lease>, RegExp]>([
    ['CLAIMED without a holder', { state: 'CLAIMED' }, /holder mismatch/],
    ['FREE with a holder', { holder }, /holder mismatch/],
    ['a claim in the future', { state: 'CLAIMED', holder, claimedAtMs: NOW + MAX_CLOCK_SKEW_MS + 1 }, /claimedAtMs/],
    ['a release in the future', { releasedAtMs: NOW + 3_600_000 }, /releasedAtMs/],
    ['reusable far in the future', { reusableAtMs: NOW + MAX_CLOCK_SKEW_MS + REUSE_WAIT_MS + 1 }, /reusableAtMs/],
    ['a negative time', { reusableAtMs: -1 }, /reusableAtMs/],
    ['a version that is no number', { version: Number.NaN }, /version/],
    ['version 0', { version: 0 }, /version/],
    ['an address that is none', { ip: '10.0.0.256' }, /address/],
    ['an unknown state', { state: 'BORROWED' as Lease['state'] }, /state/],
    [
      "a container id past the node plugin's bound",
      {
        state: 'CLAIMED',
        holder: { ...holder, containerId: 'c'.repeat(MAX_CONTAINER_ID_CHARS + 1) },
        claimedAtMs: NOW,
      },
      /oversized/,
    ],
    [
      'an oversized holder field',
      { state: 'CLAIMED', holder: { ...holder, podName: 'x'.repeat(MAX_HOLDER_FIELD_CHARS + 1) }, claimedAtMs: NOW },
      /oversized/,
    ],
  ])('rejects %s', (_, overrides, why) => {
    expect(impossibility(lease(overrides), NOW, REUSE_WAIT_MS)).toMatch(why);
  });
});
