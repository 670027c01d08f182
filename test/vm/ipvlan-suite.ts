import { expect, it } from 'vitest';
import { ADD_STEPS } from './guest/fault-cases.js';
import { guestCases } from './guest/plugin-cases.js';
import { type GuestSuite, guestCaseTests, type SuiteRun, sharedCni } from './suites.js';

/**
 * The plugin on real ipvlan (guest/main.ts): the guest runs the built plugin as a runtime would (dist-style
 * executable, env + stdin), built once for the boot (sharedCni) into the run's folder, which the guest can write
 * (the launcher writes its V8 code cache beside itself). The expected cases come from the same list the guest runs.
 */
export const ipvlanSuite: GuestSuite = {
  name: 'ipvlan',
  entry: 'test/vm/guest/main.ts',
  timeoutS: 1_500,
  prepare: async (dir, policyFile) => [await sharedCni(dir), policyFile],
};

export function ipvlanTests(run: () => SuiteRun | undefined): void {
  const results = () => run()?.results ?? [];
  it('ran the guest suite to the end', () => {
    expect(results().length, `guest console:\n${run()?.consoleTail}`).toBeGreaterThan(0);
  });

  const expected = guestCases(
    async () => undefined,
    () => {
      throw new Error('host side: never run');
    },
  ).map((c) => c.name);
  guestCaseTests(expected, run);

  it('checks ipvlan in all three modes', () => {
    for (const mode of ['l2', 'l3', 'l3s']) {
      expect(results().find((r) => r.name === `guest kernel creates an ipvlan link in mode ${mode}`)?.ok).toBe(true);
    }
  });

  it('hands the plugin a down pod ENI and sees its pods cut off without the up step (issue 26)', () => {
    const ran = results().filter((r) => r.name.startsWith('eni link: '));
    expect(ran.map((r) => r.name)).toEqual([
      expect.stringContaining('arrives as EC2 hot-plugs it'),
      expect.stringContaining('negative control'),
      expect.stringContaining('parallel ADDs bring the down ENI up'),
    ]);
    expect(ran.every((r) => r.ok)).toBe(true);
  });

  it('drives the built plugin through ADD, CHECK and DEL in all three modes', () => {
    for (const mode of ['l2', 'l3', 'l3s']) {
      const ran = results().filter((r) => r.name.startsWith(`plugin ${mode}: `));
      expect(ran.map((r) => r.name)).toEqual([
        expect.stringContaining('reach each other'),
        expect.stringContaining('DEL leaves no link'),
        ...(mode === 'l3s' ? ADD_STEPS.map((s) => expect.stringContaining(`failing after ${s} `)) : []),
      ]);
      expect(ran.every((r) => r.ok)).toBe(true);
    }
  });
}
