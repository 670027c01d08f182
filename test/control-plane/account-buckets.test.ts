import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { EC2Client } from '@aws-sdk/client-ec2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEc2Simulator } from '../../local-cloud/ec2/index.js';
import { systemClock } from '../../shared/clock.js';
import { SdkDynamoApi } from '../../shared/dynamo/sdk-client.js';
import { bucketFor, parseEc2Buckets, validateEc2Buckets } from '../../shared/ec2/account-buckets.js';
import { budgetedEc2FromEnv, EC2_BUCKETS_ENV, EC2_BUDGET_RATE_SHARE_ENV } from '../../shared/ec2/budget-env.js';
import { ec2BucketRates } from '../../shared/ec2/budgeted-ec2.js';
import { tokenStartMs } from '../../shared/ec2/gcra.js';
import { SdkEc2 } from '../../shared/ec2/sdk-ec2.js';
import { ValidationError } from '../../shared/errors.js';
import { ensureTable } from '../../shared/lease-store/ensure-table.js';
import { createLogger } from '../../shared/log.js';
import { type DynaliteHandle, startDynalite } from '../support/dynalite.js';
import { ACCOUNT, CREDENTIALS, REGION } from './support/harness.js';

const RAISED_ATTACH = { AttachNetworkInterface: { bucket: 100, refillPerSecond: 10 } };

describe('An account’s own EC2 buckets', () => {
  it('replace AWS’s figure for the buckets named and leave every other one as published', () => {
    expect(bucketFor('AttachNetworkInterface')).toEqual({ bucket: 50, refillPerSecond: 5 });
    expect(bucketFor('AttachNetworkInterface', RAISED_ATTACH)).toEqual({ bucket: 100, refillPerSecond: 10 });
    expect(bucketFor('CreateNetworkInterface', RAISED_ATTACH)).toEqual({ bucket: 100, refillPerSecond: 5 });
    // Describe* covers every Describe action without its own figure; an exact action wins over it.
    const describes = {
      'Describe*': { bucket: 200, refillPerSecond: 40 },
      DescribeInstances: { bucket: 300, refillPerSecond: 60 },
    };
    expect(bucketFor('DescribeSubnets', describes)).toEqual({ bucket: 200, refillPerSecond: 40 });
    expect(bucketFor('DescribeInstances', describes)).toEqual({ bucket: 300, refillPerSecond: 60 });
    expect(bucketFor('RebootInstances', { otherMutating: { bucket: 70, refillPerSecond: 7 } })).toEqual({
      bucket: 70,
      refillPerSecond: 7,
    });
  });

  it('more than halve the wait for the 1,000th Attach token when the Attach bucket is doubled', () => {
    const published = ec2BucketRates()('AttachNetworkInterface');
    const raised = ec2BucketRates({}, RAISED_ATTACH)('AttachNetworkInterface');
    expect(raised).toEqual({ bucket: 80, refillPerSecond: 10, heldBackTokens: 20 });
    const start = (rate: typeof raised) => tokenStartMs(rate, 0, 1000, 0);
    // The budget hands out four fifths of each burst: 40 of 50 published, 80 of 100 raised.
    expect(start(published)).toBe(((1000 - 40) / 5) * 1000);
    expect(start(raised)).toBe(((1000 - 80) / 10) * 1000);
    expect(start(raised)).toBeLessThan(start(published) / 2);
  });

  it.each([
    ['an unknown key', { 'attach network': { bucket: 1, refillPerSecond: 1 } }, /is not an EC2 action or bucket key/],
    [
      'a fractional bucket',
      { CreateTags: { bucket: 1.5, refillPerSecond: 1 } },
      /CreateTags\.bucket must be a whole number/,
    ],
    ['no refill', { CreateTags: { bucket: 10, refillPerSecond: 0 } }, /CreateTags\.refillPerSecond must be a number/],
    ['a refill as text', { CreateTags: { bucket: 10, refillPerSecond: '5' } }, /refillPerSecond must be a number/],
    ['an extra field', { CreateTags: { bucket: 10, refillPerSecond: 5, burst: 3 } }, /unknown fields burst/],
    ['a list', [], /must be an object/],
  ])('refuse %s with a message naming it', (_what, input, message) => {
    expect(() => validateEc2Buckets(input, 'ec2Buckets')).toThrow(message);
    expect(() => validateEc2Buckets(input, 'ec2Buckets')).toThrow(ValidationError);
  });

  it('refuse JSON that does not parse, naming the variable', () => {
    expect(() => parseEc2Buckets('{AttachNetworkInterface:', EC2_BUCKETS_ENV)).toThrow(
      /VPC_LEASE_EC2_BUCKETS: is not JSON/,
    );
  });
});

describe('The Lambdas’ budget (budgetedEc2FromEnv) paces calls to the account’s figures, against the EC2 simulator', () => {
  // The account's CreateTags bucket differs from AWS's published 100 tokens / 10 per second.
  const ACCOUNT_FIGURE = { bucket: 10, refillPerSecond: 5 };
  let dynalite: DynaliteHandle;
  let api: SdkDynamoApi;
  let tables = 0;

  beforeAll(async () => {
    dynalite = await startDynalite();
    api = new SdkDynamoApi(
      new DynamoDBClient({ region: REGION, endpoint: dynalite.endpoint, credentials: CREDENTIALS }),
    );
  });
  afterAll(async () => {
    api.client.destroy();
    await dynalite.close();
  });

  async function burst(env: NodeJS.ProcessEnv): Promise<{ throttled: number; ok: number }> {
    const sim = await startEc2Simulator({ region: REGION, accountId: ACCOUNT, timeScale: 1, throttling: true });
    const client = new EC2Client({ region: REGION, endpoint: sim.endpoint, credentials: CREDENTIALS, maxAttempts: 1 });
    try {
      sim.admin.setBucket('CreateTags', ACCOUNT_FIGURE);
      const vpc = sim.admin.seedVpc('10.0.0.0/16');
      const subnetId = sim.admin.seedSubnet(vpc.vpcId, '10.0.0.0/24', `${REGION}a`).subnetId;
      const sdk = new SdkEc2({ client, maxConcurrentMutations: 64 });
      tables += 1;
      const tableName = `account-buckets-${tables}`;
      await ensureTable(api.client, tableName);
      const ec2 = budgetedEc2FromEnv(
        { AWS_REGION: REGION, ...env },
        { ec2: sdk, api, tableName, clock: systemClock, logger: createLogger({ level: 'error' }) },
      );
      const eni = await sdk.createNetworkInterface({
        subnetId,
        securityGroupIds: [],
        ipCount: 0,
        prefixCount: 0,
        tags: {},
        clientToken: 'account-buckets',
      });
      await Promise.allSettled(Array.from({ length: 20 }, (_, i) => ec2.createTags([eni.eniId], { [`k${i}`]: 'v' })));
      const counts = sim.admin.counts()['CreateTags'] ?? { throttled: 0, ok: 0 };
      return { throttled: counts.throttled, ok: counts.ok };
    } finally {
      client.destroy();
      await sim.close();
    }
  }

  it('told the account’s figures, sends 20 calls without one RequestLimitExceeded; told AWS’s, EC2 refuses some', async () => {
    // Half the refill rate held back, so a late timer cannot push two tokens into one refill interval.
    const share = { [EC2_BUDGET_RATE_SHARE_ENV]: '0.5' };
    const published = await burst(share);
    expect(published.throttled).toBeGreaterThan(0);
    const told = await burst({ ...share, [EC2_BUCKETS_ENV]: JSON.stringify({ CreateTags: ACCOUNT_FIGURE }) });
    expect(told).toEqual({ throttled: 0, ok: 20 });
  }, 60_000);
});
