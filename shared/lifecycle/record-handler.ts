import { heldEc2Tickets } from '../ec2/ec2-call-context.js';
import { errorMessage } from '../errors.js';
import { METRIC_NAMES } from '../metrics.js';
import { DEFAULT_RETRY_POLICY, type LifecycleDeps, type StepOutcome } from './deps.js';
import {
  type LaunchEvent,
  type LifecycleEvent,
  parseLifecycleEvent,
  requeueBody,
  type StateChangeEvent,
  type TerminateEvent,
} from './events.js';
import { abandonLaunch, runLaunch } from './launch.js';
import { runTerminate } from './terminate.js';

type ActionableEvent = LaunchEvent | TerminateEvent | StateChangeEvent;

/**
 * Handles one SQS record body of the lifecycle queue. Returns normally when the event is done or was
 * re-enqueued to continue later; throws (→ the record is reported failed and SQS redelivers it) only when
 * neither happened, e.g. DynamoDB or SQS itself could not be reached.
 */
export function createLifecycleRecordHandler(deps: LifecycleDeps): (body: string) => Promise<void> {
  const handle = createLifecycleEventHandler(deps);
  return async (body) => handle(parseLifecycleEvent(body));
}

/** The same for an event already parsed (the batch handler parses each record once, to order and prefetch). */
export function createLifecycleEventHandler(deps: LifecycleDeps): (event: LifecycleEvent) => Promise<void> {
  return async (event) => {
    if (event.kind === 'ignored') {
      deps.logger.info('event ignored', { why: event.why });
      return;
    }
    const outcome = event.kind === 'launch' ? await runLaunch(deps, event) : await runTerminate(deps, event);
    await settle(deps, event, outcome);
  };
}

async function settle(deps: LifecycleDeps, event: ActionableEvent, outcome: StepOutcome): Promise<void> {
  const log = deps.logger.child({ instanceId: event.instanceId, flow: event.kind, attempt: event.retry.attempt });
  if (outcome.kind === 'done') {
    log.info(outcome.summary);
    return;
  }
  const policy = deps.retry ?? DEFAULT_RETRY_POLICY;
  const attempt = event.retry.attempt + 1;
  const delayS = delayFor(deps, outcome, attempt);
  const waitedS = event.retry.waitedS ?? 0;
  // Waits on the account (IAM propagation, an account quota) are not charged: abandoning would replace the
  // instance into the same error. The hook bounds them: once it is gone, the heartbeat below says so; without a
  // hook, the instance's `terminated` event drains the node and the launch then stops.
  const charged = outcome.cause === 'account' ? 0 : delayS;
  if (waitedS + charged > policy.maxWaitS) {
    const reason = `retries-exhausted: gave up after waiting ${waitedS} s over ${event.retry.attempt} attempts; last: ${outcome.reason}`;
    if (event.kind === 'launch') {
      const result = await abandonLaunch(deps, event, reason);
      log.error(result.kind === 'done' ? result.summary : reason);
      return;
    }
    // A terminate that cannot finish still lets the instance go; the reconciler removes what is left.
    log.error('terminate gave up; leaving leftovers to the reconciler', { reason });
    if (event.kind === 'terminate') await deps.autoScaling.completeLifecycleAction(event.lifecycle, 'CONTINUE');
    return;
  }
  let heartbeatAtMs = event.retry.heartbeatAtMs;
  // Every wait keeps the hook alive: a heartbeat per re-enqueue, so no clock (ours or a simulator's) decides
  // whether the hook outlives a slow EC2 or a busy Lambda.
  const hook = event.kind === 'state-change' ? undefined : event.lifecycle;
  if (hook) {
    let beat: 'done' | 'gone' | undefined;
    try {
      beat = await deps.autoScaling.recordLifecycleActionHeartbeat(hook);
      heartbeatAtMs = deps.clock.nowMs();
    } catch (err) {
      log.warn('lifecycle heartbeat failed; retrying on the next attempt', { err: errorMessage(err) });
    }
    // The action is over (timed out or completed elsewhere): Auto Scaling has moved on, and so does the event.
    // A launch's leftovers go with its instance (terminate flow, DeleteOnTermination, the reconciler).
    if (beat === 'gone' && outcome.cause === 'account') {
      log.error('lifecycle action gone while blocked on the account; dropping the event', { reason: outcome.reason });
      return;
    }
  }
  const tickets = heldEc2Tickets();
  await deps.requeue.requeue(
    requeueBody(event, {
      attempt,
      heartbeatAtMs,
      waitedS: waitedS + charged,
      reason: outcome.reason,
      ...(tickets ? { tickets } : {}),
    }),
    delayS,
  );
  deps.metrics?.add(METRIC_NAMES.requeued, { Flow: event.kind });
  log.info('re-enqueued', { reason: outcome.reason, delayS });
}

/** The lateness a ticket must tolerate for its launch to come back on time: SQS's rounding up and a busy pool. */
const ON_TIME_LATE_OK_S = 4;

function delayFor(deps: LifecycleDeps, outcome: Extract<StepOutcome, { kind: 'wait' }>, attempt: number): number {
  const policy = deps.retry ?? DEFAULT_RETRY_POLICY;
  // Back at the ticket's turn when it may still be spent a few seconds late (SQS delays are whole seconds, and
  // a busy pool picks up late): back early, a launch holds a function asleep until its turn. Otherwise two
  // seconds early, as a ticket used past its window is lost. Capped well under the hook's heartbeat timeout,
  // so a launch far down the line still heartbeats.
  if (outcome.afterS !== undefined) {
    const capS = Math.max(policy.backoffMaxS, Math.floor(deps.config.heartbeatTimeoutS / 3));
    const earlyS = (outcome.lateOkS ?? 0) >= ON_TIME_LATE_OK_S ? 0 : 2;
    return Math.max(1, Math.min(capS, Math.ceil(outcome.afterS) - earlyS));
  }
  if (outcome.delay === 'attaching') return policy.attachingDelayS;
  const random = deps.random ?? Math.random;
  // "Equal jitter" (AWS Architecture Blog, "Exponential Backoff And Jitter"): spreads a storm's retries
  // while keeping at least half the back-off.
  const capS = Math.min(policy.backoffMaxS, policy.backoffBaseS * 2 ** Math.min(attempt - 1, 10));
  return Math.max(1, Math.round(capS * (0.5 + random() / 2)));
}
