import type { Clock } from '../clock.js';
import type { DynamoApi } from '../dynamo/api.js';
import { ValidationError } from '../errors.js';
import type { Logger } from '../log.js';
import { parseEc2Buckets } from './account-buckets.js';
import { BudgetedEc2, ec2BucketRates } from './budgeted-ec2.js';
import { DynamoRateBudgetStore } from './dynamo-rate-budget.js';
import type { Ec2Port } from './port.js';
import { RateBudget } from './rate-budget.js';

/** `off` sends EC2 calls straight to EC2 (the SDK's adaptive retry alone); default `on`. */
export const EC2_BUDGET_ENV = 'VPC_LEASE_EC2_BUDGET';
/** Local clouds only: the simulator's time scale's inverse, so the budget refills as its buckets do. */
export const EC2_BUDGET_RATE_SCALE_ENV = 'VPC_LEASE_EC2_BUDGET_RATE_SCALE';
/** Part of each EC2 refill rate the budget hands out (0 < x ≤ 1; default 1), for accounts shared with tools. */
export const EC2_BUDGET_RATE_SHARE_ENV = 'VPC_LEASE_EC2_BUDGET_RATE_SHARE';
/**
 * The account's own EC2 token buckets where AWS raised them, as JSON by bucket key
 * (`{"AttachNetworkInterface":{"bucket":100,"refillPerSecond":10}}`); every other bucket keeps AWS's figure.
 */
export const EC2_BUCKETS_ENV = 'VPC_LEASE_EC2_BUCKETS';
/** Real ms the lifecycle Lambda waits inline for its new attachments before re-enqueuing (deps.attachWaitMs). */
export const ATTACH_WAIT_ENV = 'VPC_LEASE_ATTACH_WAIT_MS';

export interface BudgetWiring {
  readonly ec2: Ec2Port;
  readonly api: DynamoApi;
  readonly tableName: string;
  readonly clock: Clock;
  readonly logger: Logger;
  /** How the budget waits for a token on `clock` (default: a real timer); tests pass their clock's. */
  readonly sleep?: (ms: number) => Promise<void>;
}

function positive(env: NodeJS.ProcessEnv, name: string, max: number): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const value = Number(raw);
  if (!(value > 0 && value <= max)) throw new ValidationError(`${name} must be a number in (0, ${max}], got ${raw}`);
  return value;
}

/**
 * The Lambdas' EC2 port: the SDK adapter behind the account's shared rate budget (items in the lease table,
 * keyed by Region), unless `VPC_LEASE_EC2_BUDGET=off`.
 */
export function budgetedEc2FromEnv(env: NodeJS.ProcessEnv, wiring: BudgetWiring): Ec2Port {
  const mode = env[EC2_BUDGET_ENV] ?? 'on';
  if (mode !== 'on' && mode !== 'off') throw new ValidationError(`${EC2_BUDGET_ENV} must be on or off, got ${mode}`);
  if (mode === 'off') return wiring.ec2;
  const rateScale = positive(env, EC2_BUDGET_RATE_SCALE_ENV, 1_000_000);
  const rateShare = positive(env, EC2_BUDGET_RATE_SHARE_ENV, 1);
  const raw = env[EC2_BUCKETS_ENV];
  const accountBuckets = raw ? parseEc2Buckets(raw, EC2_BUCKETS_ENV) : {};
  const region = env['AWS_REGION'] ?? env['AWS_DEFAULT_REGION'] ?? 'local';
  const budget = new RateBudget({
    store: new DynamoRateBudgetStore(wiring.api, wiring.tableName, region),
    clock: wiring.clock,
    rateOf: ec2BucketRates(
      {
        ...(rateScale !== undefined ? { rateScale } : {}),
        ...(rateShare !== undefined ? { rateShare } : {}),
      },
      accountBuckets,
    ),
    logger: wiring.logger,
    ...(rateScale !== undefined ? { rateScale } : {}),
    ...(wiring.sleep ? { sleep: wiring.sleep } : {}),
  });
  return new BudgetedEc2(wiring.ec2, budget);
}

/**
 * The budget's (and the inline attach wait's) environment for a local cloud at `timeScale` (real ms per AWS ms): its refill rates follow the
 * simulator's buckets, which refill 1/timeScale times faster in real time; at 0 they refill instantly.
 */
export function localBudgetEnv(timeScale: number, on: boolean): Record<string, string> {
  // The lifecycle Lambda's inline wait for attachments follows the simulator's pace too (3 AWS seconds), up to
  // the 20 s the function accepts: past a time scale of 6.7 the wait is shorter in AWS time, which re-enqueues
  // create-and-attach launches sooner and does not touch adoption, which attaches nothing.
  const pace = { [ATTACH_WAIT_ENV]: String(Math.min(20_000, Math.round(3000 * Math.max(0, timeScale)))) };
  if (!on || timeScale <= 0) return { ...pace, [EC2_BUDGET_ENV]: 'off' };
  return { ...pace, [EC2_BUDGET_ENV]: 'on', [EC2_BUDGET_RATE_SCALE_ENV]: String(1 / timeScale) };
}
