import { createHash } from 'node:crypto';

export interface MessageAttributeValue {
  readonly DataType: string;
  readonly StringValue?: string;
  readonly BinaryValue?: Uint8Array;
}

export function md5Hex(data: string | Uint8Array): string {
  return createHash('md5').update(data).digest('hex');
}

function lengthPrefixed(bytes: Uint8Array): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(bytes.length);
  return Buffer.concat([length, bytes]);
}

/**
 * MD5OfMessageAttributes as SQS computes it: attributes sorted by name; for each, the length-prefixed name and
 * data type, one transport byte (1 = String/Number, 2 = Binary), then the length-prefixed value.
 * Undefined when there are no attributes (SQS then omits the field).
 */
export function md5OfMessageAttributes(
  attributes: Readonly<Record<string, MessageAttributeValue>>,
): string | undefined {
  const names = Object.keys(attributes).sort();
  if (names.length === 0) return undefined;
  const parts: Buffer[] = [];
  for (const name of names) {
    const value = attributes[name]!;
    parts.push(lengthPrefixed(Buffer.from(name, 'utf8')), lengthPrefixed(Buffer.from(value.DataType, 'utf8')));
    if (value.BinaryValue !== undefined && value.DataType.startsWith('Binary')) {
      parts.push(Buffer.from([2]), lengthPrefixed(value.BinaryValue));
    } else {
      parts.push(Buffer.from([1]), lengthPrefixed(Buffer.from(value.StringValue ?? '', 'utf8')));
    }
  }
  return md5Hex(Buffer.concat(parts));
}
