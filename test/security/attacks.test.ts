import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ATTACKS, type IamAnswer } from './attacks.js';
import { Battlefield, type Holdings } from './battlefield.js';

/**
 * A compromised node — exactly the node policy's credentials, from its own IMDS, through the IAM-enforcing
 * endpoint — attacks; then the pool-manager and the reconciler run. Each attack must be refused by IAM (when
 * it says so) and, in every case, leave the other nodes untouched: their ADDs succeed and no EC2 mutation
 * names their instance, ENIs, addresses or prefixes.
 */
describe('Security: a compromised node (DESIGN invariant 8)', () => {
  let field: Battlefield;
  const outcomes: {
    name: string;
    expected: string;
    iam: IamAnswer;
    victimsOk: boolean;
    ec2Clean: boolean;
    lambdasOk: boolean;
  }[] = [];

  beforeAll(async () => {
    field = await Battlefield.start(3);
  }, 180_000);
  afterAll(async () => {
    if (outcomes.length > 0)
      console.log(
        outcomes
          .map(
            (o) =>
              `| ${o.name} | ${o.expected} | ${o.iam} | ${o.victimsOk ? 'ADDs ok' : 'ADD FAILED'} | ${o.ec2Clean ? 'none' : 'TOUCHED'} | ${o.lambdasOk ? 'ran' : 'FAILED'} |`,
          )
          .join('\n'),
      );
    await field?.close();
  });

  it('starts from nodes whose ADDs work and whose credentials reach their own partition (positive control)', async () => {
    for (const node of field.nodes) expect(await field.addAndDelete(node)).toBeUndefined();
  });

  it('counts at least 15 distinct attacks', () => {
    expect(new Set(ATTACKS.map((a) => a.name)).size).toBeGreaterThanOrEqual(15);
  });

  for (const attack of ATTACKS) {
    it(`${attack.name}: ${attack.expected}`, async () => {
      const victims: Holdings[] = field.victims.map((v) => field.holdings(v));
      const since = field.ec2Calls.length;
      const before = await field.partition(field.attacker.arn);
      const iam = await attack.run(field);
      const controlPlaneFailures = await field.runControlPlane();
      const addErrors = await Promise.all(field.victims.map((v) => field.addAndDelete(v)));
      const touched = field.mutationsTouching(since, victims);
      // The next attack starts from the same table; what this one did to EC2 stays, for the next check to see.
      await field.restorePartition(field.attacker.arn, before);
      outcomes.push({
        name: attack.name,
        expected: attack.expected,
        iam,
        victimsOk: addErrors.every((e) => e === undefined),
        ec2Clean: touched.length === 0,
        lambdasOk: controlPlaneFailures.length === 0,
      });
      if (attack.expected === 'denied by IAM') expect(iam).toBe('denied');
      expect(addErrors).toEqual(field.victims.map(() => undefined));
      expect(touched).toEqual([]);
      expect(controlPlaneFailures).toEqual([]);
    }, 120_000);
  }
});
