import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { SqsEngine } from './engine.js';
import { SqsError, sqsErrors } from './errors.js';
import type { MessageAttributeValue } from './md5.js';
import { md5OfMessageAttributes } from './md5.js';
import type { ReceivedMessage } from './message.js';
import type { Queue } from './queue.js';

/**
 * The SQS JSON protocol (awsJson1_0, query-compatible) that @aws-sdk/client-sqs speaks: POST with
 * `X-Amz-Target: AmazonSQS.<Operation>` and a JSON body; errors carry `__type` and the
 * `x-amzn-query-error` header. Signatures are not checked.
 */
type Json = Record<string, unknown>;
type Operation = (engine: SqsEngine, input: Json, signal: AbortSignal) => Promise<Json> | Json;

interface WireAttribute {
  DataType?: string;
  StringValue?: string;
  BinaryValue?: string;
}

const BATCH_ID = /^[A-Za-z0-9_-]{1,80}$/;
const SYSTEM_ATTRIBUTES = [
  'SenderId',
  'SentTimestamp',
  'ApproximateReceiveCount',
  'ApproximateFirstReceiveTimestamp',
  'DeadLetterQueueSourceArn',
];

function str(input: Json, name: string): string {
  const value = input[name];
  if (typeof value !== 'string' || value === '') throw sqsErrors.missingParameter(name);
  return value;
}

function optInt(input: Json, name: string): number | undefined {
  const value = input[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number')
    throw sqsErrors.invalidParameter(`Value ${String(value)} for parameter ${name} is invalid.`);
  return value;
}

function stringMap(value: unknown): Record<string, string> {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object') throw sqsErrors.invalidParameter('Attributes must be a map.');
  return Object.fromEntries(Object.entries(value as Json).map(([k, v]) => [k, String(v)]));
}

function parseMessageAttributes(value: unknown): Record<string, MessageAttributeValue> {
  if (value === undefined || value === null) return {};
  const out: Record<string, MessageAttributeValue> = {};
  for (const [name, raw] of Object.entries(value as Record<string, WireAttribute>)) {
    if (!raw.DataType)
      throw sqsErrors.invalidParameter(`The message attribute '${name}' must contain a non-empty attribute type.`);
    out[name] = {
      DataType: raw.DataType,
      ...(raw.StringValue !== undefined ? { StringValue: raw.StringValue } : {}),
      ...(raw.BinaryValue !== undefined ? { BinaryValue: Buffer.from(raw.BinaryValue, 'base64') } : {}),
    };
  }
  return out;
}

function wireAttributes(attributes: Readonly<Record<string, MessageAttributeValue>>): Record<string, WireAttribute> {
  return Object.fromEntries(
    Object.entries(attributes).map(([name, a]) => [
      name,
      {
        DataType: a.DataType,
        ...(a.StringValue !== undefined ? { StringValue: a.StringValue } : {}),
        ...(a.BinaryValue !== undefined ? { BinaryValue: Buffer.from(a.BinaryValue).toString('base64') } : {}),
      },
    ]),
  );
}

/** "All", ".*", exact names and "prefix.*" select message attributes, as ReceiveMessage documents. */
function selectAttributes<T>(all: Readonly<Record<string, T>>, names: readonly string[]): Record<string, T> {
  const wantsAll = names.includes('All') || names.includes('.*');
  return Object.fromEntries(
    Object.entries(all).filter(
      ([name]) => wantsAll || names.some((n) => (n.endsWith('.*') ? name.startsWith(n.slice(0, -1)) : n === name)),
    ),
  );
}

function sendEntry(queue: Queue, entry: Json): Json {
  const result = queue.send({
    body: typeof entry['MessageBody'] === 'string' ? entry['MessageBody'] : '',
    delayS: optInt(entry, 'DelaySeconds'),
    messageAttributes: parseMessageAttributes(entry['MessageAttributes']),
  });
  return {
    MessageId: result.messageId,
    MD5OfMessageBody: result.md5OfBody,
    ...(result.md5OfMessageAttributes ? { MD5OfMessageAttributes: result.md5OfMessageAttributes } : {}),
  };
}

function receivedToWire(
  message: ReceivedMessage,
  attributeNames: readonly string[],
  messageAttributeNames: readonly string[],
): Json {
  const attributes = selectAttributes(message.attributes, attributeNames);
  const messageAttributes = selectAttributes(message.messageAttributes, messageAttributeNames);
  const md5 = md5OfMessageAttributes(messageAttributes);
  return {
    MessageId: message.messageId,
    ReceiptHandle: message.receiptHandle,
    MD5OfBody: message.md5OfBody,
    Body: message.body,
    ...(Object.keys(attributes).length > 0 ? { Attributes: attributes } : {}),
    ...(md5 ? { MD5OfMessageAttributes: md5, MessageAttributes: wireAttributes(messageAttributes) } : {}),
  };
}

/** Runs each entry, turning an entry's SqsError into a Failed item; request-level checks throw. */
function batch(entries: unknown, run: (entry: Json) => Json): Json {
  if (!Array.isArray(entries) || entries.length === 0) throw sqsErrors.emptyBatch();
  if (entries.length > 10) throw sqsErrors.tooManyEntries(entries.length);
  const seen = new Set<string>();
  for (const entry of entries as Json[]) {
    const id = entry['Id'];
    if (typeof id !== 'string' || !BATCH_ID.test(id)) throw sqsErrors.invalidBatchEntryId();
    if (seen.has(id)) throw sqsErrors.idsNotDistinct(id);
    seen.add(id);
  }
  const Successful: Json[] = [];
  const Failed: Json[] = [];
  for (const entry of entries as Json[]) {
    try {
      Successful.push({ Id: entry['Id'], ...run(entry) });
    } catch (err) {
      if (!(err instanceof SqsError)) throw err;
      Failed.push({ Id: entry['Id'], SenderFault: err.fault === 'Sender', Code: err.type, Message: err.message });
    }
  }
  return { Successful, Failed };
}

function taskToWire(task: ReturnType<SqsEngine['listMessageMoveTasks']>[number]): Json {
  return {
    ...(task.status === 'RUNNING' ? { TaskHandle: task.taskHandle } : {}),
    Status: task.status,
    SourceArn: task.sourceArn,
    ...(task.destinationArn ? { DestinationArn: task.destinationArn } : {}),
    ...(task.maxNumberOfMessagesPerSecond ? { MaxNumberOfMessagesPerSecond: task.maxNumberOfMessagesPerSecond } : {}),
    ApproximateNumberOfMessagesMoved: task.approximateNumberOfMessagesMoved,
    ApproximateNumberOfMessagesToMove: task.approximateNumberOfMessagesToMove,
    ...(task.failureReason ? { FailureReason: task.failureReason } : {}),
    StartedTimestamp: task.startedTimestampMs,
  };
}

const operations: Record<string, Operation> = {
  CreateQueue: (engine, input) => {
    const queue = engine.createQueue(str(input, 'QueueName'), stringMap(input['Attributes']));
    return { QueueUrl: queue.url() };
  },
  DeleteQueue: (engine, input) => {
    engine.deleteQueue(engine.queueByUrl(str(input, 'QueueUrl')));
    return {};
  },
  GetQueueUrl: (engine, input) => ({ QueueUrl: engine.getQueue(str(input, 'QueueName')).url() }),
  ListQueues: (engine, input) => {
    const prefix = typeof input['QueueNamePrefix'] === 'string' ? input['QueueNamePrefix'] : '';
    const max = optInt(input, 'MaxResults') ?? 1000;
    const start =
      typeof input['NextToken'] === 'string' ? Number(Buffer.from(input['NextToken'], 'base64').toString()) : 0;
    const all = engine.listQueues(prefix);
    const page = all.slice(start, start + max);
    return {
      ...(page.length > 0 ? { QueueUrls: page.map((q) => q.url()) } : {}),
      ...(input['MaxResults'] !== undefined && start + max < all.length
        ? { NextToken: Buffer.from(String(start + max)).toString('base64') }
        : {}),
    };
  },
  GetQueueAttributes: (engine, input) => {
    const queue = engine.queueByUrl(str(input, 'QueueUrl'));
    const names = Array.isArray(input['AttributeNames']) ? (input['AttributeNames'] as string[]) : [];
    const all = queue.attributes();
    if (names.includes('All')) return { Attributes: all };
    const out: Record<string, string> = {};
    for (const name of names) {
      if (!(name in all)) {
        if (name === 'RedrivePolicy' || name === 'RedriveAllowPolicy' || name === 'Policy') continue;
        throw sqsErrors.invalidAttributeName(name);
      }
      out[name] = all[name]!;
    }
    return Object.keys(out).length > 0 ? { Attributes: out } : {};
  },
  SetQueueAttributes: (engine, input) => {
    engine.queueByUrl(str(input, 'QueueUrl')).setAttributes(stringMap(input['Attributes']));
    return {};
  },
  PurgeQueue: (engine, input) => {
    engine.queueByUrl(str(input, 'QueueUrl')).purge();
    return {};
  },
  SendMessage: (engine, input) => sendEntry(engine.queueByUrl(str(input, 'QueueUrl')), input),
  SendMessageBatch: (engine, input) => {
    const queue = engine.queueByUrl(str(input, 'QueueUrl'));
    return batch(input['Entries'], (entry) => sendEntry(queue, entry));
  },
  ReceiveMessage: async (engine, input, signal) => {
    const queue = engine.queueByUrl(str(input, 'QueueUrl'));
    const attributeNames = [
      ...((input['AttributeNames'] as string[] | undefined) ?? []),
      ...((input['MessageSystemAttributeNames'] as string[] | undefined) ?? []),
    ];
    const systemNames = attributeNames.includes('All') ? SYSTEM_ATTRIBUTES : attributeNames;
    const messageAttributeNames = (input['MessageAttributeNames'] as string[] | undefined) ?? [];
    const messages = await queue.receive({
      maxMessages: optInt(input, 'MaxNumberOfMessages'),
      visibilityTimeoutS: optInt(input, 'VisibilityTimeout'),
      waitTimeS: optInt(input, 'WaitTimeSeconds'),
      signal,
    });
    if (messages.length === 0) return {};
    return { Messages: messages.map((m) => receivedToWire(m, systemNames, messageAttributeNames)) };
  },
  DeleteMessage: (engine, input) => {
    engine.queueByUrl(str(input, 'QueueUrl')).delete(str(input, 'ReceiptHandle'));
    return {};
  },
  DeleteMessageBatch: (engine, input) => {
    const queue = engine.queueByUrl(str(input, 'QueueUrl'));
    return batch(input['Entries'], (entry) => {
      queue.delete(str(entry, 'ReceiptHandle'));
      return {};
    });
  },
  ChangeMessageVisibility: (engine, input) => {
    engine
      .queueByUrl(str(input, 'QueueUrl'))
      .changeVisibility(str(input, 'ReceiptHandle'), optInt(input, 'VisibilityTimeout') ?? 0);
    return {};
  },
  ChangeMessageVisibilityBatch: (engine, input) => {
    const queue = engine.queueByUrl(str(input, 'QueueUrl'));
    return batch(input['Entries'], (entry) => {
      queue.changeVisibility(str(entry, 'ReceiptHandle'), optInt(entry, 'VisibilityTimeout') ?? 0);
      return {};
    });
  },
  ListDeadLetterSourceQueues: (engine, input) => {
    const queue = engine.queueByUrl(str(input, 'QueueUrl'));
    return { queueUrls: engine.deadLetterSources(queue.arn).map((q) => q.url()) };
  },
  StartMessageMoveTask: (engine, input) => {
    const task = engine.startMessageMoveTask(
      str(input, 'SourceArn'),
      typeof input['DestinationArn'] === 'string' ? input['DestinationArn'] : undefined,
      optInt(input, 'MaxNumberOfMessagesPerSecond'),
    );
    return { TaskHandle: task.taskHandle };
  },
  CancelMessageMoveTask: (engine, input) => {
    const task = engine.cancelMessageMoveTask(str(input, 'TaskHandle'));
    return { ApproximateNumberOfMessagesMoved: task.approximateNumberOfMessagesMoved };
  },
  ListMessageMoveTasks: (engine, input) => ({
    Results: engine.listMessageMoveTasks(str(input, 'SourceArn'), optInt(input, 'MaxResults') ?? 1).map(taskToWire),
  }),
};

function send(response: ServerResponse, status: number, body: Json, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  response.writeHead(status, {
    'content-type': 'application/x-amz-json-1.0',
    'content-length': String(Buffer.byteLength(text)),
    'x-amzn-requestid': randomUUID(),
    ...headers,
  });
  response.end(text);
}

function sendError(response: ServerResponse, err: SqsError): void {
  send(
    response,
    err.statusCode,
    { __type: `com.amazonaws.sqs#${err.type}`, message: err.message },
    { 'x-amzn-query-error': `${err.queryCode};${err.fault}` },
  );
}

export function sqsRequestHandler(
  engine: SqsEngine,
): (request: IncomingMessage, body: Buffer, response: ServerResponse) => Promise<void> {
  return async (request, body, response) => {
    const target = String(request.headers['x-amz-target'] ?? '');
    const name = target.startsWith('AmazonSQS.') ? target.slice('AmazonSQS.'.length) : '';
    const operation = operations[name];
    if (request.method !== 'POST' || !operation) {
      sendError(
        response,
        new SqsError('InvalidAction', `The action ${name || target || '(none)'} is not valid for this endpoint.`),
      );
      return;
    }
    // A long poll ends early when the client goes away (or the server closes its sockets).
    const abort = new AbortController();
    response.on('close', () => abort.abort());
    try {
      const input = body.length > 0 ? (JSON.parse(body.toString('utf8')) as Json) : {};
      const output = await operation(engine, input, abort.signal);
      if (!response.destroyed) send(response, 200, output);
    } catch (err) {
      if (err instanceof SqsError) sendError(response, err);
      else if (err instanceof SyntaxError) sendError(response, new SqsError('SerializationException', err.message));
      else sendError(response, new SqsError('InternalError', String(err), 'InternalError', 500, 'Receiver'));
    }
  };
}
