import { describe, expect, it } from 'vitest';
import { ALL_CONFIGS, chooseConfigs, controlConfigs, ROTATION } from './harness.js';

/** The fabric's rotation in `npm test` (no VM needed): the pairs cover every configuration, and a seed repeats. */
describe('fabric configuration rotation', () => {
  it('covers each of the six configurations in exactly one pair of the rotation', () => {
    expect(ROTATION.flat().sort()).toEqual([...ALL_CONFIGS].sort());
  });

  it('runs every configuration within one seed of each residue (three consecutive seeds)', () => {
    for (const start of [0, 1, 2, 41])
      expect(
        [0, 1, 2].flatMap((i) => chooseConfigs({ VPC_LEASE_FABRIC_SEED: String(start + i) }).configs).sort(),
      ).toEqual([...ALL_CONFIGS].sort());
  });

  it('repeats the pair of a given seed, and reports the seed it drew when none is given', () => {
    expect(chooseConfigs({ VPC_LEASE_FABRIC_SEED: '7' })).toEqual({ configs: [...ROTATION[1]!], seed: 7 });
    const drawn = chooseConfigs({});
    expect(drawn.configs).toEqual(chooseConfigs({ VPC_LEASE_FABRIC_SEED: String(drawn.seed) }).configs);
  });

  it('takes an explicit list or all instead of the rotation, and refuses unknown names and bad seeds', () => {
    expect(chooseConfigs({ VPC_LEASE_FABRIC_CONFIGS: 'all' }).configs).toEqual([...ALL_CONFIGS]);
    expect(chooseConfigs({ VPC_LEASE_FABRIC_CONFIGS: 'l3/pod' })).toEqual({ configs: ['l3/pod'] });
    expect(() => chooseConfigs({ VPC_LEASE_FABRIC_CONFIGS: 'l4/pod' })).toThrow(/unknown l4\/pod/);
    expect(() => chooseConfigs({ VPC_LEASE_FABRIC_SEED: '-1' })).toThrow(/whole number/);
  });

  it('runs the controls without their defence in every configuration within six consecutive seeds', () => {
    for (const start of [0, 5, 41]) {
      const seen = [0, 1, 2, 3, 4, 5].flatMap((i) =>
        controlConfigs(chooseConfigs({ VPC_LEASE_FABRIC_SEED: String(start + i) })),
      );
      expect(seen.length, 'one configuration per seeded run').toBe(6);
      expect(seen.sort()).toEqual([...ALL_CONFIGS].sort());
    }
    expect(controlConfigs({ configs: ['l2/boot', 'l3/pod'] })).toEqual(['l2/boot', 'l3/pod']);
  });
});
