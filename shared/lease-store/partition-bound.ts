import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { VpcLeaseError } from '../errors.js';

/**
 * The most of one partition the control plane reads into memory at once. A node can create items in its own
 * partition without limit (UpdateItem upserts, up to 400 KB each), so a reader that takes a partition whole
 * lets one node exhaust a Lambda's memory or time and stop that schedule for every node after it. The
 * largest partition the control plane writes (2 × 4,096 leases under 1 KB each and the node item) is half this.
 */
export const PARTITION_READ_MAX_BYTES = 16 * 1024 * 1024;

/** Where a reader of one partition stops, and whose partition it is (for the error). */
export interface PartitionBound {
  readonly bytes: number;
  readonly instanceArn: string;
}

/** The data a Query or Scan page reads before DynamoDB ends it (without a Limit, every page but the last). */
export const QUERY_PAGE_BYTES = 1024 * 1024;

/** A partition past PARTITION_READ_MAX_BYTES: a node's flood, not items the control plane wrote. */
export class PartitionTooLargeError extends VpcLeaseError {
  constructor(
    readonly instanceArn: string,
    readonly bytesRead: number,
  ) {
    super(
      `partition ${instanceArn} holds more than ${PARTITION_READ_MAX_BYTES} bytes (${bytesRead} read): not what the control plane wrote; left unread`,
    );
  }
}

/** An item's size as DynamoDB counts it (attribute names and values; numbers by their digits), near enough for a bound. */
export function itemBytes(item: Readonly<Record<string, AttributeValue>>): number {
  let bytes = 0;
  for (const [name, value] of Object.entries(item)) bytes += Buffer.byteLength(name) + valueBytes(value);
  return bytes;
}

function valueBytes(v: AttributeValue): number {
  if (v.S !== undefined) return Buffer.byteLength(v.S);
  if (v.N !== undefined) return v.N.length;
  if (v.B !== undefined) return v.B.length;
  if (v.SS !== undefined) return v.SS.reduce((sum, s) => sum + Buffer.byteLength(s), 0);
  if (v.NS !== undefined) return v.NS.reduce((sum, s) => sum + s.length, 0);
  if (v.BS !== undefined) return v.BS.reduce((sum, b) => sum + b.length, 0);
  if (v.L !== undefined) return 3 + v.L.reduce((sum, e) => sum + 1 + valueBytes(e), 0);
  if (v.M !== undefined) return 3 + itemBytes(v.M) + Object.keys(v.M).length;
  return 1;
}
