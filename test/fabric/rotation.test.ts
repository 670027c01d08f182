import { describe, expect, it } from 'vitest';
import { CONFIGS, type ControlShare, controlCount, formatShare, parseShare, shareOf } from './configs.js';
import {
  ALL_CONFIGS,
  CONTROLS_PER_RUN,
  chooseConfigs,
  controlShares,
  ROTATION,
  SEEDS_FOR_EVERY_CONFIG,
  SEEDS_FOR_EVERY_CONTROL,
} from './harness.js';

const seeded = (seed: number) => chooseConfigs({ VPC_LEASE_FABRIC_SEED: String(seed) });
const STARTS = [0, 1, 5, 6, 7, 11, 41, 999_999_000];

/** The fabric's rotation in `npm test` (no VM needed): the seeds cover every configuration, and a seed repeats. */
describe('fabric configuration rotation', () => {
  it('holds each of the eight configurations once', () => {
    expect([...ROTATION].sort()).toEqual([...ALL_CONFIGS].sort());
  });

  it(`runs one configuration per seed, and every configuration within ${SEEDS_FOR_EVERY_CONFIG} consecutive seeds`, () => {
    expect(SEEDS_FOR_EVERY_CONFIG).toBe(8);
    for (const start of STARTS) {
      const seen = Array.from({ length: SEEDS_FOR_EVERY_CONFIG }, (_, i) => seeded(start + i).configs);
      expect(seen.every((c) => c.length === 1)).toBe(true);
      expect(seen.flat().sort(), `from seed ${start}`).toEqual([...ALL_CONFIGS].sort());
    }
  });

  it('repeats the configuration of a given seed, and reports the seed it drew when none is given', () => {
    expect(seeded(9)).toEqual({ configs: [ROTATION[1]!], seed: 9 });
    expect(seeded(7)).toEqual({ configs: ['dual/l2'], seed: 7 });
    const drawn = chooseConfigs({});
    expect(drawn.configs).toEqual(seeded(drawn.seed!).configs);
  });

  it('takes an explicit list or all instead of the rotation, and refuses unknown names and bad seeds', () => {
    expect(chooseConfigs({ VPC_LEASE_FABRIC_CONFIGS: 'all' }).configs).toEqual([...ALL_CONFIGS]);
    expect(chooseConfigs({ VPC_LEASE_FABRIC_CONFIGS: 'l3/pod' })).toEqual({ configs: ['l3/pod'] });
    expect(chooseConfigs({ VPC_LEASE_FABRIC_CONFIGS: 'ipv6/l3s,dual/l2' })).toEqual({
      configs: ['ipv6/l3s', 'dual/l2'],
    });
    expect(() => chooseConfigs({ VPC_LEASE_FABRIC_CONFIGS: 'l4/pod' })).toThrow(/unknown l4\/pod/);
    expect(() => chooseConfigs({ VPC_LEASE_FABRIC_SEED: '-1' })).toThrow(/whole number/);
  });

  /** Each control a run lifts, as `<configuration> #<its index in the guest's list>`. */
  const lifted = (shares: readonly ControlShare[]): string[] =>
    shares.flatMap((share) => {
      const count = controlCount(CONFIGS.find((c) => c.name === share.config)!.family);
      const indices = shareOf(
        Array.from({ length: count }, (_, i) => i),
        share,
      );
      return indices.map((i) => `${share.config} #${i}`);
    });
  const everyControl = CONFIGS.flatMap((c) =>
    Array.from({ length: controlCount(c.family) }, (_, i) => `${c.name} #${i}`),
  );

  it(`lifts at most ${CONTROLS_PER_RUN} controls a seed, and every control of every configuration within ${SEEDS_FOR_EVERY_CONTROL} seeds`, () => {
    expect(everyControl.length).toBe(6 * 4 + 6 + 9);
    expect(SEEDS_FOR_EVERY_CONTROL).toBe(24);
    for (const start of STARTS) {
      const runs = Array.from({ length: SEEDS_FOR_EVERY_CONTROL }, (_, i) => lifted(controlShares(seeded(start + i))));
      for (const run of runs) {
        expect(run.length, `from seed ${start}`).toBeGreaterThan(0);
        expect(run.length, `from seed ${start}`).toBeLessThanOrEqual(CONTROLS_PER_RUN);
      }
      expect([...new Set(runs.flat())].sort(), `from seed ${start}`).toEqual([...everyControl].sort());
    }
    // One seed fewer misses a control from some start: the figure is the least that works.
    const short = STARTS.some((start) => {
      const seen = Array.from({ length: SEEDS_FOR_EVERY_CONTROL - 1 }, (_, i) =>
        lifted(controlShares(seeded(start + i))),
      );
      return new Set(seen.flat()).size < everyControl.length;
    });
    expect(short).toBe(true);
  });

  it("cuts a configuration's controls into disjoint shares that together hold all of them", () => {
    for (const c of CONFIGS) {
      // The configuration's seeds of consecutive cycles: one share each.
      const first = controlShares(seeded(ROTATION.indexOf(c.name)))[0]!;
      const shares = Array.from({ length: first.parts }, (_, cycle) => {
        return controlShares(seeded(cycle * ROTATION.length + ROTATION.indexOf(c.name)))[0]!;
      });
      const all = shares.flatMap((share) => lifted([share]));
      expect(all.sort(), c.name).toEqual(everyControl.filter((x) => x.startsWith(`${c.name} #`)).sort());
    }
  });

  it('lifts every control of an explicit list, and reads and writes a share as FABRIC_CONTROLS carries it', () => {
    expect(controlShares({ configs: ['l2/boot', 'dual/l2'] }).map(formatShare)).toEqual(['l2/boot', 'dual/l2']);
    expect(lifted(controlShares({ configs: ['dual/l2'] }))).toHaveLength(9);
    const share = controlShares(seeded(8 + 7))[0]!;
    expect(share).toEqual({ config: 'dual/l2', part: 1, parts: 3 });
    expect(formatShare(share)).toBe('dual/l2#2of3');
    expect(parseShare('dual/l2#2of3')).toEqual(share);
    expect(parseShare('l3/pod')).toEqual({ config: 'l3/pod', part: 0, parts: 1 });
    expect(() => parseShare('dual/l2#4of3')).toThrow(/not a share/);
    expect(() => parseShare('l4/pod')).toThrow(/no fabric configuration/);
  });
});
