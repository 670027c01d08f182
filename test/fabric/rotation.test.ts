import { describe, expect, it } from 'vitest';
import {
  ALL_CONFIGS,
  chooseConfigs,
  controlConfigs,
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

  it(`runs the controls without their defence in every other seed, every configuration's within ${SEEDS_FOR_EVERY_CONTROL} seeds`, () => {
    expect(SEEDS_FOR_EVERY_CONTROL).toBe(16);
    for (const start of STARTS) {
      const runs = Array.from({ length: SEEDS_FOR_EVERY_CONTROL }, (_, i) => controlConfigs(seeded(start + i)));
      expect(runs.filter((c) => c.length > 0).length, `from seed ${start}: half the runs`).toBe(
        SEEDS_FOR_EVERY_CONTROL / 2,
      );
      expect(runs.flat().sort(), `from seed ${start}`).toEqual([...ALL_CONFIGS].sort());
      // Never more than two seeds in a row without them.
      for (let i = 0; i + 2 < runs.length; i++) expect(runs.slice(i, i + 3).flat().length).toBeGreaterThan(0);
    }
    // One seed fewer misses a configuration's controls from some start: the figure is the least that works.
    const short = STARTS.some((start) => {
      const seen = Array.from({ length: SEEDS_FOR_EVERY_CONTROL - 1 }, (_, i) => controlConfigs(seeded(start + i)));
      return new Set(seen.flat()).size < ALL_CONFIGS.length;
    });
    expect(short).toBe(true);
    expect(controlConfigs({ configs: ['l2/boot', 'l3/pod'] })).toEqual(['l2/boot', 'l3/pod']);
  });
});
