import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createScheduler, type SimScheduler } from '../../local-cloud/events/scheduler.js';
import { type SqsSimulatorHandle, startSqsSimulator } from '../../local-cloud/sqs/index.js';
import { ManualClock } from '../../shared/clock.js';
import { SdkDynamoApi } from '../../shared/dynamo/sdk-client.js';
import { budgetedEc2FromEnv, localBudgetEnv } from '../../shared/ec2/budget-env.js';
import { BudgetedEc2, ec2BucketRates } from '../../shared/ec2/budgeted-ec2.js';
import { DynamoRateBudgetStore } from '../../shared/ec2/dynamo-rate-budget.js';
import { createLifecycleBatchHandler } from '../../shared/lifecycle/batch-handler.js';
import { silentLogger } from '../../shared/log.js';
import { type Requeue, SqsRequeue } from '../../shared/queue/requeue.js';
import { launchEventBody, sqsRecord } from './support/events.js';
import { ACCOUNT, CREDENTIALS, Harness, REGION } from './support/harness.js';

/** SQS counts DelaySeconds in whole seconds of AWS time: a launch sent back for its turn is up to one late. */
const ROUNDING_AWS_S = 1;
/**
 * How far ahead the emptied Create bucket puts the launch's first token, in AWS seconds: past the held-ticket
 * wait at every scale here (4 AWS s, but never under 4 real s), so the launch is deferred, not put to sleep.
 */
const AHEAD_AWS_S = 40;
const CREATE = 'CreateNetworkInterface';

/**
 * The local cloud at `--time-scale` N runs every AWS duration N times slower (N real ms per AWS ms), and the
 * Lambdas' budget refills at 1/N of EC2's rates (localBudgetEnv). A launch the budget defers goes back to SQS
 * with DelaySeconds, which the local SQS stretches by N: so the wait the budget names must be in AWS time, or
 * it is stretched twice. Driven through the Lambdas' own budget wiring (budgetedEc2FromEnv on dynalite), the
 * real batch and record handlers, the real SDK SendMessage and the local SQS, all on one manual clock that
 * the budget's sleeps advance: when a message comes back is read off the queue, never off a wall clock.
 */
describe.each([1, 5, 0.25])('At --time-scale %s, a launch deferred by the EC2 rate budget', (timeScale) => {
  let h: Harness;
  let scheduler: SimScheduler;
  let sqs: SqsSimulatorHandle;
  let client: SQSClient;
  const clock = new ManualClock(Date.now());
  /** Real ms of `awsMs` on the local cloud. */
  const real = (awsMs: number): number => awsMs * timeScale;

  beforeAll(async () => {
    h = await Harness.start({ config: { minLeases: 4 } });
    scheduler = createScheduler({ timeScale, clock });
    sqs = await startSqsSimulator({ scheduler, region: REGION, accountId: ACCOUNT });
    client = new SQSClient({ endpoint: sqs.endpoint, region: REGION, credentials: CREDENTIALS });
  });
  afterAll(async () => {
    client.destroy();
    await sqs.close();
    scheduler.close();
    await h.close();
  });

  it("comes back through the local SQS at its ticket, within SQS's rounding, and spends it there", async () => {
    const api = new SdkDynamoApi(
      new DynamoDBClient({ region: REGION, endpoint: h.dynamo.endpoint, credentials: CREDENTIALS }),
    );
    const ec2 = budgetedEc2FromEnv(
      { ...localBudgetEnv(timeScale, true), AWS_REGION: REGION },
      {
        ec2: h.ec2,
        api,
        tableName: h.config.tableName,
        clock,
        logger: silentLogger,
        sleep: async (ms) => clock.advance(ms),
      },
    );
    expect(ec2).toBeInstanceOf(BudgetedEc2);
    const { budget } = ec2 as BudgetedEc2;
    // Others took the Create bucket's burst and AHEAD_AWS_S of its refill, in the budget's own figures.
    const t0 = clock.nowMs();
    const rate = ec2BucketRates({ rateScale: 1 / timeScale })(CREATE);
    const taken = rate.bucket + AHEAD_AWS_S * ec2BucketRates()(CREATE).refillPerSecond;
    const drained = await new DynamoRateBudgetStore(api, h.config.tableName, REGION).take(
      CREATE,
      taken,
      rate,
      t0,
      Number.MAX_SAFE_INTEGER,
    );
    expect(drained.kind).toBe('granted');

    const queue = sqs.engine.createQueue('lifecycle');
    const sqsRequeue = new SqsRequeue(queue.url(), { client });
    // What the handler sends (SendMessage's DelaySeconds), then sent for real.
    const sent: { body: string; delayS: number }[] = [];
    const requeue: Requeue = {
      requeue: async (body, delayS) => {
        sent.push({ body, delayS });
        await sqsRequeue.requeue(body, delayS);
      },
    };
    // No inline attach wait: it sleeps on a real timer, and the budget's path is what is under test here.
    const deps = h.deps(undefined, { ec2, clock, requeue, attachWaitMs: 0 });
    const id = h.launchInstance('m5.large');

    // First pickup, with the invocation bound the scale bench gives (4 AWS s): the Create token is further.
    await createLifecycleBatchHandler(deps, { budgetWaitMs: real(4000) })({
      Records: [sqsRecord('first', launchEventBody(id, { timeMs: t0 }))],
    });
    // Deferred (each of its concurrent Creates once) and re-enqueued once, holding its Create tickets.
    const deferred = budget.stats.deferred;
    expect(deferred).toBeGreaterThan(0);
    expect(sent).toHaveLength(1);
    const held = JSON.parse(sent[0]!.body).vpcLease.tickets?.[CREATE]?.[0] as [number, number] | undefined;
    if (held === undefined) throw new Error(`re-enqueued without a Create ticket: ${sent[0]!.body}`);
    const [ticketMs, usableUntilMs] = held;
    expect(ticketMs - t0).toBeGreaterThanOrEqual(real(AHEAD_AWS_S * 1000));
    // Queued behind others' turns, the ticket may go seconds late: the launch is sent back for its turn.
    expect(usableUntilMs - ticketMs).toBeGreaterThanOrEqual(real(4000));
    if (timeScale === 1) expect(sent[0]!.delayS).toBe(Math.ceil((ticketMs - t0) / 1000));

    // When the local SQS hands it out again: stepped by whole AWS seconds, the grain of DelaySeconds.
    let returnedAtMs: number | undefined;
    let body: string | undefined;
    for (let s = 0; s <= 900 && body === undefined; s += 1) {
      clock.set(t0 + real(s * 1000));
      body = (await queue.receive({ maxMessages: 1, waitTimeS: 0 }))[0]?.body;
      if (body !== undefined) returnedAtMs = clock.nowMs();
    }
    expect(body).toBeDefined();
    const back = { ticketMs, latestMs: ticketMs + real(ROUNDING_AWS_S * 1000), returnedAtMs };
    expect(returnedAtMs, JSON.stringify(back)).toBeGreaterThanOrEqual(ticketMs);
    expect(returnedAtMs, JSON.stringify(back)).toBeLessThanOrEqual(back.latestMs);

    // Second pickup in an invocation whose bound is already spent: the ticket, a little late but within its
    // window, is spent at once instead of the launch being deferred again.
    const creates = h.callsByAction()[CREATE] ?? 0;
    await createLifecycleBatchHandler(deps, { budgetWaitMs: 0 })({ Records: [sqsRecord('second', body!)] });
    expect(budget.stats.deferred, JSON.stringify(budget.stats)).toBe(deferred);
    expect((h.callsByAction()[CREATE] ?? 0) - creates).toBeGreaterThan(0);
    expect(clock.nowMs()).toBeGreaterThanOrEqual(ticketMs);
    expect(budget.stats.ticketLateMsMax).toBe(returnedAtMs! - ticketMs);
    const budgetReasons = sent.slice(1).filter((m) => JSON.parse(m.body).vpcLease.reason.includes('rate budget'));
    expect(budgetReasons).toEqual([]);
  }, 120_000);
});
