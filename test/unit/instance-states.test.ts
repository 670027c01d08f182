import { describe, expect, it } from 'vitest';
import { EC2_INSTANCE_STATES, isInstanceLive, isInstanceProvisionable } from '../../shared/domain/instance-states.js';
import { decideStrayLeases } from '../../shared/reconcile/gc-plan.js';

const ARN = 'arn:aws:ec2:eu-west-1:123456789012:instance/i-0123456789abcdef0';
const ID = 'i-0123456789abcdef0';

/** What the reconciler does with leases that have no node item, on an instance in `state`. */
function strayAction(state: string | undefined): string | undefined {
  const states = new Map(state === undefined ? [] : [[ID, state]]);
  const [stray] = decideStrayLeases({
    nowMs: 10_000,
    leasePartitions: [ARN],
    nodes: [],
    instanceStates: states,
    strayMarks: new Map(),
    minMarkAgeMs: 0,
  });
  return stray?.action;
}

describe('EC2 instance states, decided once (shared/domain/instance-states.ts)', () => {
  // Each row: [state, holds its ENIs (nothing collected), may be given more (launch, pool)].
  const TABLE: readonly [string, boolean, boolean][] = [
    ['pending', true, true],
    ['running', true, true],
    // The states on which the launch, the pool and the reconciler used to disagree: launch and pool called them
    // gone, the reconciler live. Both are true at once: they keep what they hold, and get nothing more.
    ['stopping', true, false],
    ['stopped', true, false],
    ['shutting-down', true, false],
    ['terminated', false, false],
  ];

  it('covers every state EC2 defines', () => {
    expect(TABLE.map(([s]) => s)).toEqual([...EC2_INSTANCE_STATES]);
  });

  it.each(TABLE)('%s: holds its ENIs %s, provisionable %s', (state, holds, provisionable) => {
    expect(isInstanceLive(state)).toBe(holds);
    expect(isInstanceProvisionable(state)).toBe(provisionable);
  });

  it('never gives more to an instance it would not keep ENIs for', () => {
    for (const state of EC2_INSTANCE_STATES)
      if (isInstanceProvisionable(state)) expect(isInstanceLive(state)).toBe(true);
  });

  it('treats an unknown EC2 state cautiously and an unknown instance as gone', () => {
    expect(isInstanceLive('hibernating')).toBe(true);
    expect(isInstanceProvisionable('hibernating')).toBe(false);
    expect(isInstanceLive(undefined)).toBe(false);
    expect(isInstanceProvisionable(undefined)).toBe(false);
  });

  it.each(TABLE)(
    'the reconciler only reports stray leases of a %s instance while it holds its ENIs',
    (state, holds) => {
      expect(strayAction(state)).toBe(holds ? 'report' : 'mark');
    },
  );

  it('the reconciler marks stray leases of an instance EC2 does not know', () => {
    expect(strayAction(undefined)).toBe('mark');
  });
});
