import { VpcLeaseError } from '../../shared/errors.js';

/**
 * An SQS API error as the JSON protocol returns it: `__type` is `com.amazonaws.sqs#<type>`, and the
 * `x-amzn-query-error: <queryCode>;Sender` header carries the legacy Query code the SDK exposes as `Code`.
 * Types and codes are the ones in @aws-sdk/client-sqs's error schemas (`awsQueryError` traits).
 */
export class SqsError extends VpcLeaseError {
  constructor(
    readonly type: string,
    message: string,
    readonly queryCode: string = type,
    readonly statusCode = 400,
    readonly fault: 'Sender' | 'Receiver' = 'Sender',
  ) {
    super(message);
  }
}

export const sqsErrors = {
  queueDoesNotExist: (): SqsError =>
    new SqsError('QueueDoesNotExist', 'The specified queue does not exist.', 'AWS.SimpleQueueService.NonExistentQueue'),
  queueAlreadyExists: (attribute: string): SqsError =>
    new SqsError(
      'QueueNameExists',
      `A queue already exists with the same name and a different value for attribute ${attribute}`,
      'QueueAlreadyExists',
    ),
  receiptHandleIsInvalid: (handle: string): SqsError =>
    new SqsError(
      'ReceiptHandleIsInvalid',
      `The input receipt handle "${handle}" is not a valid receipt handle.`,
      'ReceiptHandleIsInvalid',
      404,
    ),
  messageNotInflight: (): SqsError =>
    new SqsError(
      'MessageNotInflight',
      'Message does not exist or is not available for visibility timeout change.',
      'AWS.SimpleQueueService.MessageNotInflight',
    ),
  purgeQueueInProgress: (queueArn: string): SqsError =>
    new SqsError(
      'PurgeQueueInProgress',
      `Only one PurgeQueue operation on ${queueArn.split(':').pop()} is allowed every 60 seconds.`,
      'AWS.SimpleQueueService.PurgeQueueInProgress',
      403,
    ),
  emptyBatch: (): SqsError =>
    new SqsError(
      'EmptyBatchRequest',
      'There should be at least one SendMessageBatchRequestEntry in the request.',
      'AWS.SimpleQueueService.EmptyBatchRequest',
    ),
  tooManyEntries: (count: number): SqsError =>
    new SqsError(
      'TooManyEntriesInBatchRequest',
      `Maximum number of entries per request are 10. You have sent ${count}.`,
      'AWS.SimpleQueueService.TooManyEntriesInBatchRequest',
    ),
  idsNotDistinct: (id: string): SqsError =>
    new SqsError('BatchEntryIdsNotDistinct', `Id ${id} repeated.`, 'AWS.SimpleQueueService.BatchEntryIdsNotDistinct'),
  invalidBatchEntryId: (): SqsError =>
    new SqsError(
      'InvalidBatchEntryId',
      'A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.',
      'AWS.SimpleQueueService.InvalidBatchEntryId',
    ),
  invalidParameter: (message: string): SqsError => new SqsError('InvalidParameterValue', message),
  invalidAttributeName: (name: string): SqsError => new SqsError('InvalidAttributeName', `Unknown Attribute ${name}.`),
  invalidAttributeValue: (message: string): SqsError => new SqsError('InvalidAttributeValue', message),
  missingParameter: (name: string): SqsError =>
    new SqsError('MissingParameter', `The request must contain the parameter ${name}.`),
  resourceNotFound: (message: string): SqsError =>
    new SqsError('ResourceNotFoundException', message, 'ResourceNotFoundException', 404),
  unsupportedOperation: (message: string): SqsError =>
    new SqsError('UnsupportedOperation', message, 'AWS.SimpleQueueService.UnsupportedOperation'),
};
