import throttlingTable from '../data/ec2-api-throttling.json' with { type: 'json' };
import { ValidationError } from '../errors.js';
import type { BucketRate } from './gcra.js';

/**
 * EC2's request token buckets for one account and Region, by bucket key (an action, `Describe*`, or
 * `otherMutating` for mutating actions without a published figure of their own). AWS publishes the defaults
 * (shared/data/ec2-api-throttling.json); an account whose limits were raised gives its own figures for the
 * buckets that changed, and every other bucket keeps AWS's.
 */
export type Ec2Buckets = Readonly<Record<string, BucketRate>>;

const PUBLISHED = throttlingTable as { buckets: Record<string, BucketRate>; otherMutating: BucketRate };

/** Keys an override may name: EC2 action names, EC2's `Describe*` and unpaginated keys, and `otherMutating`. */
const BUCKET_KEY =
  /^([A-Z][A-Za-z0-9]{2,99}\*?|DescribeNetworkInterfaces \(unfiltered or unpaginated\)|otherMutating)$/;

/** The figure for `key`: the account's own if it gave one, else AWS's (the action's, `Describe*`, or the rest). */
export function bucketFor(key: string, overrides: Ec2Buckets = {}): BucketRate {
  const own = (k: string): BucketRate | undefined => overrides[k] ?? PUBLISHED.buckets[k];
  return (
    own(key) ??
    (key.startsWith('Describe') ? own('Describe*') : undefined) ??
    overrides['otherMutating'] ??
    PUBLISHED.otherMutating
  );
}

/**
 * Lambda-seconds one launch holds the lifecycle function in a scale-out paced by the budget (its pickups, the
 * sleeps for its turns, the inline attach wait): ~2–4 in the 1,000-node bench (`npm run bench -- scale --large`).
 */
export const LIFECYCLE_SECONDS_PER_LAUNCH = 4;

/**
 * The lifecycle function's default concurrency for an account's buckets. Launches cannot go faster than the
 * Attach bucket refills and each holds a function some seconds (Little's law), so the cap follows that rate:
 * 20 at AWS's published 5 per second, 40 at a doubled 10. Never below 20, nor above SQS's 1,000.
 */
export function lifecycleConcurrencyFor(buckets: Ec2Buckets = {}): number {
  const launchesPerSecond = bucketFor('AttachNetworkInterface', buckets).refillPerSecond;
  return Math.min(1000, Math.max(20, Math.ceil(launchesPerSecond * LIFECYCLE_SECONDS_PER_LAUNCH)));
}

/** Checks an account's bucket figures; the problems name each bad entry. */
export function validateEc2Buckets(input: unknown, subject: string): Ec2Buckets {
  if (typeof input !== 'object' || input === null || Array.isArray(input))
    throw new ValidationError(`${subject}: must be an object of bucket figures by EC2 action`);
  const problems: string[] = [];
  const out: Record<string, BucketRate> = {};
  for (const [key, value] of Object.entries(input)) {
    const { bucket, refillPerSecond, ...rest } = (value ?? {}) as Record<string, unknown>;
    if (!BUCKET_KEY.test(key)) problems.push(`${subject}: ${JSON.stringify(key)} is not an EC2 action or bucket key`);
    else if (!Number.isInteger(bucket) || (bucket as number) < 1 || (bucket as number) > 100_000)
      problems.push(`${subject}: ${key}.bucket must be a whole number of tokens from 1 to 100000`);
    else if (typeof refillPerSecond !== 'number' || !(refillPerSecond > 0 && refillPerSecond <= 10_000))
      problems.push(`${subject}: ${key}.refillPerSecond must be a number in (0, 10000]`);
    else if (Object.keys(rest).length > 0)
      problems.push(`${subject}: ${key} has unknown fields ${Object.keys(rest).join(', ')}`);
    else out[key] = { bucket: bucket as number, refillPerSecond };
  }
  if (problems.length > 0) throw new ValidationError(problems.join('; '), problems);
  return out;
}

/** Parses the JSON form the Lambdas get in their environment. */
export function parseEc2Buckets(json: string, subject: string): Ec2Buckets {
  let input: unknown;
  try {
    input = JSON.parse(json);
  } catch {
    throw new ValidationError(`${subject}: is not JSON`);
  }
  return validateEc2Buckets(input, subject);
}
