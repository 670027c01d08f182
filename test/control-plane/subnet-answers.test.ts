import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../shared/clock.js';
import type { Ec2Port, Ec2Subnet, SubnetQuery } from '../../shared/ec2/port.js';
import { withSubnetAnswersShared } from '../../shared/ec2/subnet-answers.js';

const SUBNET: Ec2Subnet = {
  subnetId: 'subnet-0123456789abcdef0',
  cidr: '10.0.0.0/20',
  availabilityZone: 'us-east-1a',
  availableIpCount: 4000,
} as Ec2Subnet;

/** A port whose DescribeSubnets counts its calls and fails when told to; every other call is a marker. */
function countingPort() {
  const queries: SubnetQuery[] = [];
  let failNext = false;
  const port = {
    describeSubnets: async (query: SubnetQuery) => {
      queries.push(query);
      if (failNext) {
        failNext = false;
        throw new Error('RequestLimitExceeded');
      }
      return [{ ...SUBNET }];
    },
    describeInstanceLimits: async () => 'passed through',
  } as unknown as Ec2Port;
  return { port, queries, failOnce: () => (failNext = true) };
}

describe('Function: withSubnetAnswersShared', () => {
  const query = { subnetIds: [SUBNET.subnetId] };

  it('answers the same query once per ttl, and again after it', async () => {
    const clock = new ManualClock(0);
    const { port, queries } = countingPort();
    const ec2 = withSubnetAnswersShared(port, clock, 9_000);
    await Promise.all([ec2.describeSubnets(query), ec2.describeSubnets(query)]);
    clock.advance(8_999);
    await ec2.describeSubnets(query);
    expect(queries).toHaveLength(1);
    // Another query is its own answer.
    await ec2.describeSubnets({ tags: { tier: 'pods' }, vpcId: 'vpc-1' });
    expect(queries).toHaveLength(2);
    clock.advance(1);
    await ec2.describeSubnets(query);
    expect(queries).toHaveLength(3);
    expect(await ec2.describeInstanceLimits('m5.large')).toBe('passed through');
  });

  it('keeps no failed answer, and hands each caller its own copy', async () => {
    const clock = new ManualClock(0);
    const { port, queries, failOnce } = countingPort();
    const ec2 = withSubnetAnswersShared(port, clock, 9_000);
    failOnce();
    await expect(ec2.describeSubnets(query)).rejects.toThrow('RequestLimitExceeded');
    const [first] = await ec2.describeSubnets(query);
    expect(queries).toHaveLength(2);
    (first as { availableIpCount: number }).availableIpCount = 0;
    const [second] = await ec2.describeSubnets(query);
    expect(second!.availableIpCount).toBe(4000);
    expect(queries).toHaveLength(2);
  });

  it('is the port itself when the ttl is 0 (a local cloud at instant pace)', () => {
    const { port } = countingPort();
    expect(withSubnetAnswersShared(port, new ManualClock(0), 0)).toBe(port);
  });
});
