import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import type { Lease, LeaseHolder } from '../domain/lease.js';
import type { DynamoApi } from '../dynamo/api.js';
import { isConditionalCheckFailed, isTransient } from '../dynamo/errors.js';
import {
  errorMessage,
  LeaseConflictError,
  LeaseNotFoundError,
  StoreUnavailableError,
  VpcLeaseError,
} from '../errors.js';
import type { IpFamily } from '../ipv6.js';
import { num, str } from './attribute-value.js';
import { A, decodeLease, encodeHolder, type Item, leaseKey } from './item-codec.js';
import { itemBytes, type PartitionBound, PartitionTooLargeError, QUERY_PAGE_BYTES } from './partition-bound.js';
import type { HolderRef } from './port.js';
import { CLAIMABLE_INDEX, LEASE_SORT_PREFIX } from './table.js';

/** BatchWriteItem's own limit. */
/** A query on the lease table (the table's name is added). */
type QueryInput = Omit<Parameters<DynamoApi['query']>[0], 'TableName'>;

export const BATCH_SIZE = 25;

export interface LeaseTableOptions {
  readonly api: DynamoApi;
  readonly tableName: string;
  readonly batchRetries: number;
  readonly sleep: (ms: number) => Promise<void>;
  readonly random: () => number;
}

/**
 * The requests DynamoLeaseStore builds from more than one place: the claim's index read and conditional
 * update, the holder lookup, paginated queries, failed-condition diagnosis and batched deletes.
 */
export class LeaseTable {
  private readonly api: DynamoApi;
  private readonly table: string;
  private readonly batchRetries: number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly random: () => number;

  constructor(options: LeaseTableOptions) {
    this.api = options.api;
    this.table = options.tableName;
    this.batchRetries = options.batchRetries;
    this.sleep = options.sleep;
    this.random = options.random;
  }

  /** Consistent: a pod's own lease must be found right after its claim, which the index cannot promise. */
  async queryHolder(instanceArn: string, holder: HolderRef, family?: IpFamily): Promise<Lease | undefined> {
    const only = leaseFilter({ ...(family ? { family } : {}) });
    const items = await this.queryAll(
      {
        KeyConditionExpression: `${A.pk} = :pk AND begins_with(${A.sk}, :prefix)`,
        FilterExpression: [
          `${A.state} = :claimed AND ${A.containerId} = :hc AND ${A.ifName} = :hi`,
          ...only.terms,
        ].join(' AND '),
        ExpressionAttributeValues: {
          ':pk': str(instanceArn),
          ':prefix': str(LEASE_SORT_PREFIX),
          ':claimed': str('CLAIMED'),
          ':hc': str(holder.containerId),
          ':hi': str(holder.ifName),
          ...only.values,
        },
        ConsistentRead: true,
      },
      true,
    );
    return items[0] ? decodeLease(items[0]) : undefined;
  }

  /**
   * Every item a query returns. With `bound` it stops once the items pass `bound.bytes` (a node can grow its own
   * partition without limit). @throws PartitionTooLargeError past the bound.
   */
  async queryAll(input: QueryInput, firstOnly = false, bound?: PartitionBound): Promise<Item[]> {
    const items: Item[] = [];
    let bytes = 0;
    for await (const page of this.queryPages(input, bound)) {
      for (const item of page.Items ?? []) {
        items.push(item as Item);
        if (bound) bytes += itemBytes(item);
      }
      if (bound && bytes > bound.bytes) throw new PartitionTooLargeError(bound.instanceArn, bytes);
      if (firstOnly && items.length > 0) break;
    }
    return items;
  }

  /**
   * Every page of a query on the table, following LastEvaluatedKey until DynamoDB gives none. With `bound`, it
   * stops once the full pages alone (DynamoDB ends a page at 1 MB read) have read past `bound.bytes`, however
   * few items a filter or a COUNT returned. @throws PartitionTooLargeError past the bound.
   */
  async *queryPages(
    input: QueryInput,
    bound?: PartitionBound,
  ): AsyncGenerator<Awaited<ReturnType<DynamoApi['query']>>> {
    let start: Item | undefined;
    let fullPages = 0;
    do {
      const page = await this.api.query({
        ...input,
        TableName: this.table,
        ...(start ? { ExclusiveStartKey: start } : {}),
      });
      start = page.LastEvaluatedKey as Item | undefined;
      if (bound && start && input.Limit === undefined && ++fullPages * QUERY_PAGE_BYTES > bound.bytes)
        throw new PartitionTooLargeError(bound.instanceArn, fullPages * QUERY_PAGE_BYTES);
      yield page;
    } while (start);
  }

  /**
   * One page of the claimable index (oldest reusableAt first), minus the addresses already lost, and a random
   * pick among them: 64 pods starting at once on one node then spread over the page instead of all racing for
   * its first item.
   */
  async pickCandidate(
    instanceArn: string,
    nowMs: number,
    limit: number,
    lost: ReadonlySet<string>,
    filter: LeaseFilter = {},
  ): Promise<{ ip: string; version: number } | undefined> {
    const only = leaseFilter(filter);
    const pages = this.queryPages({
      IndexName: CLAIMABLE_INDEX.name,
      KeyConditionExpression: `${A.pk} = :arn AND ${A.cAt} <= :now`,
      ...(only.terms.length > 0 ? { FilterExpression: only.terms.join(' AND ') } : {}),
      ExpressionAttributeValues: { ':arn': str(instanceArn), ':now': num(nowMs), ...only.values },
      ProjectionExpression: `${A.sk}, ${A.version}`,
      // A local index may be read consistently (a global one may not): a lease claimed a moment ago is
      // already gone from the answer, so no attempt is spent on it.
      ConsistentRead: true,
      Limit: limit + lost.size,
    });
    for await (const page of pages) {
      const fresh = (page.Items ?? [])
        // Only lease items: a node could put `cAt` on its node item, which would then show up here.
        .filter((item) => item[A.sk]?.S?.startsWith(LEASE_SORT_PREFIX) === true)
        .map((item) => ({
          ip: (item[A.sk]?.S ?? '').slice(LEASE_SORT_PREFIX.length),
          version: Number(item[A.version]?.N ?? Number.NaN),
        }))
        .filter((c) => c.ip !== '' && Number.isFinite(c.version) && !lost.has(c.ip));
      if (fresh.length > 0) return fresh[Math.floor(this.random() * fresh.length)] ?? fresh[0];
    }
    return undefined;
  }

  async claimItem(
    instanceArn: string,
    ip: string,
    version: number,
    holder: LeaseHolder,
    nowMs: number,
  ): Promise<Lease> {
    const h = encodeHolder(holder);
    const out = await this.api.updateItem({
      TableName: this.table,
      Key: leaseKey(instanceArn, ip),
      UpdateExpression:
        `SET ${[`${A.state} = :claimed`, `${A.claimedAt} = :now`, `${A.version} = ${A.version} + :one`, ...h.set].join(', ')} ` +
        `REMOVE ${[A.cAt, ...h.remove].join(', ')}`,
      // The index may lag the table: the version and state checks make a stale candidate lose cleanly. The
      // second clause makes a retried request whose first try did land succeed again instead of "losing" to
      // itself and leaking the lease.
      ConditionExpression:
        `(${A.state} IN (:free, :cooldown) AND ${A.version} = :v AND ${A.cAt} <= :now) OR ` +
        `(${A.state} = :claimed AND ${A.containerId} = :${A.containerId} AND ${A.ifName} = :${A.ifName})`,
      ExpressionAttributeValues: {
        ...h.values,
        ':claimed': str('CLAIMED'),
        ':free': str('FREE'),
        ':cooldown': str('COOLDOWN'),
        ':now': num(nowMs),
        ':one': num(1),
        ':v': num(version),
      },
      ReturnValues: 'ALL_NEW',
    });
    return decodeLease(out.Attributes as Item);
  }

  /** An UpdateItem whose failed condition becomes LeaseNotFoundError or LeaseConflictError carrying the item. */
  async conditionalUpdate(
    instanceArn: string,
    ip: string,
    verb: string,
    input: Parameters<DynamoApi['updateItem']>[0],
  ): Promise<Lease> {
    try {
      const out = await this.api.updateItem({ ...input, ReturnValuesOnConditionCheckFailure: 'ALL_OLD' });
      return decodeLease(out.Attributes as Item);
    } catch (err) {
      if (!isConditionalCheckFailed(err)) throw err;
      const current = await this.getLeaseItem(instanceArn, ip, err);
      if (!current) throw new LeaseNotFoundError(instanceArn, ip);
      throw new LeaseConflictError(`failed to ${verb} lease ${ip} of ${instanceArn}: it is ${current.state}`, current);
    }
  }

  /** The item a failed condition returned (DynamoDB does, dynalite does not), else a consistent read. */
  async getLeaseItem(instanceArn: string, ip: string, failure?: unknown): Promise<Lease | undefined> {
    const returned = (failure as { Item?: Item } | undefined)?.Item;
    if (returned && Object.keys(returned).length > 0) return decodeLease(returned);
    const out = await this.api.getItem({ TableName: this.table, Key: leaseKey(instanceArn, ip), ConsistentRead: true });
    return out.Item ? decodeLease(out.Item as Item) : undefined;
  }

  async batchDelete(keys: Item[]): Promise<void> {
    let pending = keys.map((key) => ({ DeleteRequest: { Key: key } }));
    for (let round = 0; pending.length > 0; round++) {
      if (round > this.batchRetries) {
        throw new StoreUnavailableError(`failed to delete ${pending.length} items: still unprocessed after retries`);
      }
      if (round > 0) await this.sleep(Math.random() * Math.min(1000, 50 * 2 ** round));
      const out = await this.api.batchWriteItem({ RequestItems: { [this.table]: pending } });
      pending = (out.UnprocessedItems?.[this.table] ?? []).flatMap((r) =>
        r.DeleteRequest?.Key ? [{ DeleteRequest: { Key: r.DeleteRequest.Key as Item } }] : [],
      );
    }
  }
}

/** What a claim or a holder lookup may be narrowed to (ClaimOptions' `family` and `eniId`). */
export interface LeaseFilter {
  readonly family?: IpFamily;
  readonly eniId?: string;
}

/**
 * Filter terms for a LeaseFilter. A filter may not name the sort key, so the family is read off the subnet CIDR
 * (an IPv6 one holds ':', an IPv4 one never does; validation keeps it the address's own): no attribute is added.
 * A filter narrows the answer, not the read units spent.
 */
function leaseFilter(filter: LeaseFilter): { terms: string[]; values: Record<string, AttributeValue> } {
  const terms: string[] = [];
  const values: Record<string, AttributeValue> = {};
  if (filter.family) {
    terms.push(`${filter.family === 'ipv6' ? '' : 'NOT '}contains(${A.subnetCidr}, :colon)`);
    values[':colon'] = str(':');
  }
  if (filter.eniId !== undefined) {
    terms.push(`${A.eniId} = :eni`);
    values[':eni'] = str(filter.eniId);
  }
  return { terms, values };
}

/** Throttling and network failures (after the client's own retries) become StoreUnavailableError. */
export async function guard<T>(verb: string, subject: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof VpcLeaseError) throw err;
    if (isTransient(err)) {
      throw new StoreUnavailableError(`failed to ${verb} ${subject}: ${errorMessage(err)}`, { cause: err });
    }
    throw err;
  }
}
