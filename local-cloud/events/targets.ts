import type { Queue } from '../sqs/queue.js';
import type { BusTarget } from './bus.js';

/** An SQS queue as a rule target: the message body is the event JSON, as EventBridge delivers it. */
export function queueTarget(queue: Queue, id = queue.name): BusTarget {
  return { id, arn: queue.arn, deliver: (eventJson) => void queue.send({ body: eventJson }) };
}
