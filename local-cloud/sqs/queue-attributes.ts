import { sqsErrors } from './errors.js';

/** The settable queue attributes the simulator honours, parsed; the raw strings are kept for GetQueueAttributes. */
export interface QueueSettings {
  readonly visibilityTimeoutS: number;
  readonly delayS: number;
  readonly retentionS: number;
  readonly receiveWaitS: number;
  readonly maximumMessageSizeBytes: number;
  readonly redrive?: { readonly deadLetterTargetArn: string; readonly maxReceiveCount: number };
}

export const DEFAULT_QUEUE_ATTRIBUTES: Readonly<Record<string, string>> = {
  VisibilityTimeout: '30',
  DelaySeconds: '0',
  MessageRetentionPeriod: '345600',
  ReceiveMessageWaitTimeSeconds: '0',
  MaximumMessageSize: '1048576',
  SqsManagedSseEnabled: 'true',
};

/** Attributes SetQueueAttributes/CreateQueue accept; others are InvalidAttributeName. */
const SETTABLE = new Set([
  'VisibilityTimeout',
  'DelaySeconds',
  'MessageRetentionPeriod',
  'ReceiveMessageWaitTimeSeconds',
  'MaximumMessageSize',
  'RedrivePolicy',
  'RedriveAllowPolicy',
  'Policy',
  'KmsMasterKeyId',
  'KmsDataKeyReusePeriodSeconds',
  'SqsManagedSseEnabled',
]);

function intIn(attributes: Record<string, string>, name: string, min: number, max: number): number {
  const raw = attributes[name] ?? DEFAULT_QUEUE_ATTRIBUTES[name]!;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw sqsErrors.invalidAttributeValue(`Invalid value for the parameter ${name}.`);
  }
  return value;
}

export function validateAttributeNames(attributes: Readonly<Record<string, string>>): void {
  for (const name of Object.keys(attributes)) {
    if (name === 'FifoQueue' || name === 'ContentBasedDeduplication') {
      throw sqsErrors.unsupportedOperation('FIFO queues are not simulated by the local cloud.');
    }
    if (!SETTABLE.has(name)) throw sqsErrors.invalidAttributeName(name);
  }
}

export function parseQueueSettings(attributes: Record<string, string>): QueueSettings {
  const settings: QueueSettings = {
    visibilityTimeoutS: intIn(attributes, 'VisibilityTimeout', 0, 43_200),
    delayS: intIn(attributes, 'DelaySeconds', 0, 900),
    retentionS: intIn(attributes, 'MessageRetentionPeriod', 60, 1_209_600),
    receiveWaitS: intIn(attributes, 'ReceiveMessageWaitTimeSeconds', 0, 20),
    maximumMessageSizeBytes: intIn(attributes, 'MaximumMessageSize', 1024, 1_048_576),
  };
  const redriveRaw = attributes['RedrivePolicy'];
  if (redriveRaw === undefined || redriveRaw === '') return settings;
  let parsed: { deadLetterTargetArn?: unknown; maxReceiveCount?: unknown };
  try {
    parsed = JSON.parse(redriveRaw) as typeof parsed;
  } catch {
    throw sqsErrors.invalidAttributeValue(
      'Invalid value for the parameter RedrivePolicy. Reason: Redrive policy is not a valid JSON map.',
    );
  }
  const maxReceiveCount = Number(parsed.maxReceiveCount);
  if (
    typeof parsed.deadLetterTargetArn !== 'string' ||
    !Number.isInteger(maxReceiveCount) ||
    maxReceiveCount < 1 ||
    maxReceiveCount > 1000
  ) {
    throw sqsErrors.invalidAttributeValue(
      'Value ' +
        redriveRaw +
        ' for parameter RedrivePolicy is invalid. Reason: Redrive policy does not contain mandatory attribute: deadLetterTargetArn or maxReceiveCount in range 1..1000.',
    );
  }
  return { ...settings, redrive: { deadLetterTargetArn: parsed.deadLetterTargetArn, maxReceiveCount } };
}
