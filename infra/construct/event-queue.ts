import { Duration } from 'aws-cdk-lib';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';

export interface EventQueueProps {
  /** The consumer's timeout: AWS asks for a visibility timeout of at least six times it. */
  readonly consumerTimeout: Duration;
  /** Receives before a message goes to the dead-letter queue. */
  readonly maxReceiveCount: number;
}

/** The queue between EventBridge and the instance-lifecycle Lambda, with its dead-letter queue. */
export class EventQueue extends Construct {
  readonly queue: sqs.Queue;
  /** Also the failure destination of the stream source and of the scheduled rules' targets. */
  readonly deadLetterQueue: sqs.Queue;
  /** Also the delay before SQS redelivers a record the consumer reported as failed. */
  readonly visibilityTimeout: Duration;

  constructor(scope: Construct, id: string, props: EventQueueProps) {
    super(scope, id);
    // SSE-SQS rather than a KMS key: EventBridge can deliver to it without a key policy, and it costs nothing.
    this.deadLetterQueue = new sqs.Queue(this, 'DeadLetters', {
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
    });
    this.visibilityTimeout = Duration.seconds(props.consumerTimeout.toSeconds() * 6);
    this.queue = new sqs.Queue(this, 'Events', {
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      visibilityTimeout: this.visibilityTimeout,
      // Longer than the lifecycle hook's heartbeat window, so a slow backlog is not silently dropped.
      retentionPeriod: Duration.days(4),
      deadLetterQueue: { queue: this.deadLetterQueue, maxReceiveCount: props.maxReceiveCount },
    });
  }
}
