import { SendMessageCommand, SQSClient, type SQSClientConfig } from '@aws-sdk/client-sqs';
import { errorMessage, VpcLeaseError } from '../errors.js';

/**
 * Work that must wait on EC2 (an attachment in progress, a throttled call) goes back to the queue with a
 * delay instead of sleeping inside the function: the invocation ends, the record succeeds, and the same event
 * comes back after `delayS`.
 */
export interface Requeue {
  requeue(body: string, delayS: number): Promise<void>;
}

/** SQS allows 0…900 s of DelaySeconds. */
export const MAX_DELAY_S = 900;

export class RequeueError extends VpcLeaseError {}

export class SqsRequeue implements Requeue {
  readonly client: SQSClient;

  constructor(
    readonly queueUrl: string,
    options: { client?: SQSClient; clientConfig?: SQSClientConfig } = {},
  ) {
    this.client = options.client ?? new SQSClient({ retryMode: 'adaptive', maxAttempts: 5, ...options.clientConfig });
  }

  async requeue(body: string, delayS: number): Promise<void> {
    const DelaySeconds = Math.max(0, Math.min(MAX_DELAY_S, Math.round(delayS)));
    try {
      await this.client.send(new SendMessageCommand({ QueueUrl: this.queueUrl, MessageBody: body, DelaySeconds }));
    } catch (err) {
      throw new RequeueError(`failed to re-enqueue to ${this.queueUrl}: ${errorMessage(err)}`, { cause: err });
    }
  }
}
