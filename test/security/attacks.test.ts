import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answers, type IamAnswer, ownGetItem } from './attack-requests.js';
import { ATTACKS } from './attacks.js';
import { Battlefield, type Holdings } from './battlefield.js';

/**
 * A compromised node — exactly the node policy's credentials, from its own IMDS, through the IAM-enforcing
 * endpoint — attacks; then the pool-manager and the reconciler run. Each request of each attack must get the
 * answer the attack names from IAM (the endpoint's own counters must agree: a refusal is the policy's, not a
 * broken client's), and every attack must leave the other nodes untouched: their ADDs succeed and no EC2
 * mutation names their instance, ENIs, addresses or prefixes.
 */
describe('Security: a compromised node (DESIGN invariant 8)', () => {
  let field: Battlefield;
  const outcomes: {
    name: string;
    iam: string;
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
              `| ${o.name} | ${o.iam} | ${o.victimsOk ? 'ADDs ok' : 'ADD FAILED'} | ${o.ec2Clean ? 'none' : 'TOUCHED'} | ${o.lambdasOk ? 'ran' : 'FAILED'} |`,
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

  it("lets the attacker's own client read its own node item (the attack client's positive control)", async () => {
    const allowedBefore = field.cloud.iam.counts.allowed;
    expect(await answers([ownGetItem(field.attacker)])).toEqual(['accepted']);
    expect(field.cloud.iam.counts.allowed).toBe(allowedBefore + 1);
  });

  for (const attack of ATTACKS) {
    const named = typeof attack.iam === 'string' ? attack.iam : attack.iam.join(', ');
    it(`${attack.name}: IAM ${named}; no effect on the other nodes`, async () => {
      // The attack's client still gets in where the policy allows: a refusal below is the policy's.
      expect(await answers([ownGetItem(field.attacker)])).toEqual(['accepted']);
      const victims: Holdings[] = field.victims.map((v) => field.holdings(v));
      const since = field.ec2Calls.length;
      const before = await field.partition(field.attacker.arn);
      const ownBefore = await attack.unchanged?.(field);
      const counts = { ...field.cloud.iam.counts };
      const got = await attack.run(field);
      const iamCounted = {
        allowed: field.cloud.iam.counts.allowed - counts.allowed,
        denied: field.cloud.iam.counts.denied - counts.denied,
        unauthenticated: field.cloud.iam.counts.unauthenticated - counts.unauthenticated,
      };
      const controlPlaneFailures = await field.runControlPlane();
      const addErrors = await Promise.all(field.victims.map((v) => field.addAndDelete(v)));
      const touched = field.mutationsTouching(since, victims);
      const ownAfter = await attack.unchanged?.(field);
      // The next attack starts from the same table; what this one did to EC2 stays, for the next check to see.
      await field.restorePartition(field.attacker.arn, before);
      outcomes.push({
        name: attack.name,
        iam: summary(got),
        victimsOk: addErrors.every((e) => e === undefined),
        ec2Clean: touched.length === 0,
        lambdasOk: controlPlaneFailures.length === 0,
      });
      expect(got.length).toBeGreaterThan(0);
      expect(got).toEqual(typeof attack.iam === 'string' ? got.map(() => attack.iam) : attack.iam);
      expect(iamCounted).toEqual({
        allowed: got.filter((a) => a === 'accepted').length,
        denied: got.filter((a) => a === 'denied').length,
        unauthenticated: got.filter((a) => /Unrecognized|InvalidSignature/.test(a)).length,
      });
      expect(addErrors).toEqual(field.victims.map(() => undefined));
      expect(touched).toEqual([]);
      expect(controlPlaneFailures).toEqual([]);
      expect(ownAfter).toEqual(ownBefore);
    }, 120_000);
  }
});

/** `accepted ×150` or `denied ×2, accepted ×1`: each answer with its count, in first-seen order. */
function summary(got: readonly IamAnswer[]): string {
  const counts = new Map<string, number>();
  for (const a of got) counts.set(a, (counts.get(a) ?? 0) + 1);
  return [...counts].map(([a, c]) => `${a} ×${c}`).join(', ');
}
