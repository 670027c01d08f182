import { describe, expect, it } from 'vitest';
import { launchOutcomeViolations } from './outcomes.js';

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
