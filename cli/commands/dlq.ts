import {
  GetQueueAttributesCommand,
  ListQueuesCommand,
  type Message,
  ReceiveMessageCommand,
  StartMessageMoveTaskCommand,
} from '@aws-sdk/client-sqs';
import { instanceArn } from '../../shared/domain/arn.js';
import { type LifecycleEvent, parseLifecycleEvent } from '../../shared/lifecycle/events.js';
import type { CliContext } from '../context.js';
import { CliError, EXIT } from '../errors.js';
import { table } from '../table.js';
import { type Command, print } from './command.js';

export interface DeadEvent {
  readonly messageId: string;
  readonly sentAt: string | null;
  readonly receiveCount: number;
  readonly detailType: string;
  readonly instanceId: string | null;
  readonly autoScalingGroup: string | null;
  readonly transition: string | null;
  /**
   * The reason a re-enqueued event carries, else the node item's recorded failure; SQS keeps no error with a
   * message, so anything else is in the function's logs.
   */
  readonly lastError: string;
}

/** The dead-letter queue: --dlq, the local cloud's, or the one queue whose name says vpc-lease and DLQ. */
export async function findDlq(ctx: CliContext, given: string | undefined): Promise<string> {
  if (given) return given;
  if (ctx.local) return ctx.local.dlqUrl;
  const urls = (await ctx.sqs().send(new ListQueuesCommand({ MaxResults: 1000 }))).QueueUrls ?? [];
  const candidates = urls.filter((u) => /dead|dlq/i.test(u) && /vpc-?lease|allocator/i.test(u));
  if (candidates.length === 1) return candidates[0]!;
  throw new CliError(
    candidates.length === 0
      ? 'no vpc-lease dead-letter queue found: pass --dlq <queue URL> (the stack output DeadLetterQueueUrl)'
      : `several candidate dead-letter queues, pass one with --dlq: ${candidates.join(', ')}`,
    EXIT.usage,
  );
}

/** Reads without taking: visibility 0 leaves each message where it is; stops when a round brings nothing new. */
export async function peek(ctx: CliContext, queueUrl: string): Promise<Message[]> {
  const seen = new Map<string, Message>();
  for (let round = 0; round < 20; round += 1) {
    const out = await ctx.sqs().send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: 10,
        VisibilityTimeout: 0,
        WaitTimeSeconds: 0,
        MessageSystemAttributeNames: ['All'],
      }),
    );
    let fresh = 0;
    for (const m of out.Messages ?? [])
      if (m.MessageId && !seen.has(m.MessageId)) {
        seen.set(m.MessageId, m);
        fresh += 1;
      }
    if (fresh === 0) break;
  }
  return [...seen.values()];
}

/** The handler's own reading of the body, or the error it threw on every delivery. */
function parseBody(body: string): { event: LifecycleEvent } | { error: string } {
  try {
    return { event: parseLifecycleEvent(body) };
  } catch (err) {
    return { error: (err as Error).message };
  }
}

export async function describe(ctx: CliContext, m: Message): Promise<DeadEvent> {
  let event: {
    'detail-type'?: string;
    region?: string;
    account?: string;
    detail?: Record<string, unknown>;
    vpcLease?: { attempt?: number; reason?: string };
  } = {};
  try {
    event = JSON.parse(m.Body ?? '{}');
  } catch {
    // not an EventBridge event: shown as is
  }
  const d = event.detail ?? {};
  const instanceId = (d['EC2InstanceId'] ?? d['instance-id'] ?? null) as string | null;
  let lastError = 'no failure recorded on the node item; see the lifecycle function’s logs';
  const retry = event.vpcLease;
  const parsed = parseBody(m.Body ?? '');
  if ('error' in parsed) {
    lastError = `invalid event: ${parsed.error}`;
  } else if (retry?.reason) {
    // A re-enqueued event carries why it had to wait (shared/lifecycle/events.ts requeueBody).
    lastError = `attempt ${retry.attempt ?? '?'}: ${retry.reason}`;
  } else if (parsed.event.kind !== 'ignored') {
    // The ARN as the handler built it, with the event's partition: an aws-cn node's item is not under arn:aws.
    const { region, accountId, instanceId: id, partition } = parsed.event;
    try {
      const node = await ctx.store().getNode(instanceArn(region, accountId, id, partition));
      if (node?.failureReason) lastError = `${node.phase}: ${node.failureReason}`;
      else if (!node) lastError = 'no node item (the event failed before creating it); see the function’s logs';
    } catch {
      // an event of another account or a malformed id: keep the generic hint
    }
  }
  const sent = Number(m.Attributes?.SentTimestamp);
  return {
    messageId: m.MessageId ?? '',
    sentAt: Number.isFinite(sent) ? new Date(sent).toISOString() : null,
    receiveCount: Number(m.Attributes?.ApproximateReceiveCount ?? 0),
    detailType: event['detail-type'] ?? '(not an EventBridge event)',
    instanceId,
    autoScalingGroup: (d['AutoScalingGroupName'] as string | undefined) ?? null,
    transition: (d['LifecycleTransition'] as string | undefined) ?? (d['state'] as string | undefined) ?? null,
    lastError,
  };
}

export const dlqCommand: Command = {
  name: 'dlq',
  usage: 'vpc-lease dlq [--redrive] [--dlq QUEUE_URL]',
  summary: 'lifecycle events that failed every delivery, with their last error; --redrive sends them back',
  options: ['redrive', 'dlq'],
  positionals: [0, 0],
  async run(input) {
    const ctx = input.ctx();
    const dlq = input.line.options.dlq;
    const queueUrl = await findDlq(ctx, typeof dlq === 'string' ? dlq : undefined);
    const events = await Promise.all((await peek(ctx, queueUrl)).map((m) => describe(ctx, m)));
    if (!input.line.options.redrive) {
      print(input, { queueUrl, messages: events }, () =>
        events.length === 0
          ? [`${queueUrl}: empty`]
          : [
              `${queueUrl}: ${events.length} failed events`,
              ...table(
                ['MESSAGE', 'SENT', 'EVENT', 'INSTANCE', 'GROUP', 'LAST ERROR'],
                events.map((e) => [
                  e.messageId.slice(0, 8),
                  e.sentAt ?? '-',
                  e.transition ?? e.detailType,
                  e.instanceId ?? '-',
                  e.autoScalingGroup ?? '-',
                  e.lastError,
                ]),
              ),
              'after fixing the cause: vpc-lease dlq --redrive',
            ],
      );
      return 0;
    }
    const attrs = await ctx
      .sqs()
      .send(new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] }));
    const arn = attrs.Attributes?.QueueArn;
    if (!arn) throw new CliError(`no QueueArn for ${queueUrl}`, EXIT.environment);
    // Without a destination SQS moves each message back to the queue it came from (DeadLetterQueueSourceArn).
    const task = await ctx.sqs().send(new StartMessageMoveTaskCommand({ SourceArn: arn }));
    print(input, { queueUrl, redriven: events.length, taskHandle: task.TaskHandle ?? null }, () => [
      `redriving ${events.length} events from ${queueUrl} to their source queue (task ${task.TaskHandle ?? '?'})`,
    ]);
    return 0;
  },
};
