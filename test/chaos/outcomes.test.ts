import { describe, expect, it } from 'vitest';
import { fillOutcomeViolations, launchOutcomeViolations } from './outcomes.js';

const READY = (instanceId: string) => ({ instanceId, phase: 'READY' as const });

describe('Chaos launch outcomes are asserted, not only counted (outcomes.ts)', () => {
  it('passes a schedule whose launches all continued or came up READY', () => {
    expect(
      launchOutcomeViolations({
        hookResults: [
          { instanceId: 'i-1', result: 'CONTINUE' },
          { instanceId: 'i-2', result: 'TIMEOUT' },
        ],
        nodes: [READY('i-1'), READY('i-3')],
        victim: undefined,
      }),
    ).toEqual([]);
  });

  it('fails a hook launch abandoned under passing faults', () => {
    const out = launchOutcomeViolations({
      hookResults: [{ instanceId: 'i-1', result: 'ABANDON' }],
      nodes: [],
      victim: undefined,
    });
    expect(out).toEqual(['outcome: 1 launch(es) abandoned under passing faults: i-1']);
  });

  it('fails a hook-less launch that ended FAILED, naming its reason', () => {
    const out = launchOutcomeViolations({
      hookResults: [],
      nodes: [READY('i-1'), { instanceId: 'i-2', phase: 'FAILED', failureReason: 'fatal: CreateNetworkInterface X' }],
      victim: undefined,
    });
    expect(out).toEqual(['outcome: launch of i-2 FAILED: fatal: CreateNetworkInterface X']);
  });

  it('spares only the instance the schedule terminated mid-provisioning', () => {
    const ends = {
      hookResults: [
        { instanceId: 'i-v', result: 'ABANDON' },
        { instanceId: 'i-1', result: 'ABANDON' },
      ],
      nodes: [{ instanceId: 'i-v', phase: 'FAILED' as const, failureReason: 'limits: x' }],
    };
    expect(launchOutcomeViolations({ ...ends, victim: 'i-v' })).toEqual([
      'outcome: 1 launch(es) abandoned under passing faults: i-1',
    ]);
    expect(launchOutcomeViolations({ ...ends, victim: undefined })).toHaveLength(2);
  });
});

describe('The full-subnets family: no abandon while room remains; a plain reason when none does', () => {
  const abandoned = (failureReason: string) => ({
    hookResults: [
      { instanceId: 'i-1', result: 'CONTINUE' },
      { instanceId: 'i-2', result: 'ABANDON' },
    ],
    nodes: [READY('i-1'), { instanceId: 'i-2', phase: 'FAILED' as const, failureReason }],
    victim: undefined,
    minLeases: 8,
  });
  const exhausted = "subnets-exhausted: every candidate subnet is out of room for the launch's minimum";

  it('fails an abandon while a candidate subnet could still hold the minimum, whatever the reason says', () => {
    // 9 free: the ENI's own address and 8 leases.
    const out = fillOutcomeViolations({ ...abandoned(exhausted), freeAddresses: { 'subnet-a': 0, 'subnet-b': 9 } });
    expect(out).toEqual(['full subnets: launch of i-2 abandoned though subnet-b (9 free) could hold its minimum of 8']);
  });

  it('passes an abandon when no subnet can hold the minimum and the node item says subnets-exhausted', () => {
    expect(fillOutcomeViolations({ ...abandoned(exhausted), freeAddresses: { 'subnet-a': 0, 'subnet-b': 8 } })).toEqual(
      [],
    );
  });

  it('fails an abandon with every subnet full whose node item does not say so plainly', () => {
    const out = fillOutcomeViolations({
      ...abandoned('retries-exhausted: attachments in progress'),
      freeAddresses: { 'subnet-a': 0, 'subnet-b': 3 },
    });
    expect(out).toEqual([
      'full subnets: launch of i-2 abandoned with every subnet full, but its node item does not say so: retries-exhausted: attachments in progress',
    ]);
  });

  it('spares the victim of a termination mid-provisioning and passes launches that all continued', () => {
    const free = { freeAddresses: { 'subnet-b': 100 } };
    expect(fillOutcomeViolations({ ...abandoned('limits: x'), ...free, victim: 'i-2' })).toEqual([]);
    expect(
      fillOutcomeViolations({ hookResults: [], nodes: [READY('i-1')], victim: undefined, minLeases: 8, ...free }),
    ).toEqual([]);
  });
});
