import { RateBudgetDeferral } from '../ec2/rate-budget.js';
import type { WaitOutcome } from './deps.js';

/**
 * A launch deferred by the account's EC2 rate budget waits as long as the budget says, with a heartbeat, and
 * is not charged to its retry budget: a busy account is not the node's fault, and abandoning would only
 * replace the instance into the same queue.
 */
export function budgetWait(...errors: readonly unknown[]): WaitOutcome | undefined {
  const deferral = errors.find((e): e is RateBudgetDeferral => e instanceof RateBudgetDeferral);
  if (!deferral) return undefined;
  return {
    kind: 'wait',
    reason: deferral.message,
    delay: 'backoff',
    cause: 'account',
    // AWS seconds already (the budget's rate scale), as SQS counts the delay: a local cloud stretches it once.
    afterS: deferral.retryAfterMs / 1000,
    ...(deferral.lateOkMs > 0 ? { lateOkS: deferral.lateOkMs / 1000 } : {}),
  };
}
