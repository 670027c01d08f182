import type { Lease, LeaseHolder, LeaseState, NewLease } from '../domain/lease.js';
import type { NodeRecord } from '../domain/node.js';
import type { DynamoApi } from '../dynamo/api.js';
import { isConditionalCheckFailed } from '../dynamo/errors.js';
import { LeaseConflictError, NoFreeLeaseError } from '../errors.js';
import type { IpFamily } from '../ipv6.js';
import { sleepMs } from '../sleep.js';
import { num, str } from './attribute-value.js';
import { BATCH_SIZE, guard, LeaseTable } from './dynamo-lease-table.js';
import { DynamoNodeIndex } from './dynamo-node-index.js';
import { DynamoNodeItems } from './dynamo-node-items.js';
import { DynamoPassMarker } from './dynamo-pass-marker.js';
import { decodeEach, type IllFormedHandler } from './ill-formed.js';
import { A, decodeLease, encodeNewLease, HOLDER_ATTRS, type Item, leaseKey } from './item-codec.js';
import { PARTITION_READ_MAX_BYTES } from './partition-bound.js';
import type { ClaimOptions, HolderRef, LeaseStore, NodeCursor, NodeRefPage } from './port.js';
import { CLAIMABLE_INDEX, LEASE_SORT_PREFIX } from './table.js';
import { CLAIM_DEFAULTS, leaseStoreChecks } from './validate.js';

export interface DynamoLeaseStoreOptions {
  readonly api: DynamoApi;
  readonly tableName: string;
  /**
   * Concurrent conditional PutItems in putLeases. Default 16: a launch's pool (16 leases with the default
   * watermarks) goes out in one round trip instead of two.
   */
  readonly putConcurrency?: number;
  /** Rounds of BatchWriteItem retries for unprocessed deletes before giving up. Default 8. */
  readonly batchRetries?: number;
  /** Pause between those rounds (tests). */
  readonly sleep?: (ms: number) => Promise<void>;
  /** Candidate choice (tests); default Math.random. */
  readonly random?: () => number;
  /**
   * Called for each item listLeases or listNodes skips because it does not decode (a node can create items in
   * its own partition): one malformed item must not stop the control plane's pass over every node.
   */
  readonly onIllFormedItem?: IllFormedHandler;
}

/**
 * The LeaseStore on DynamoDB. Every state change is one conditional write on one item; the lease state machine
 * is the one port.ts and domain/lease.ts document, and the memory fake mirrors it line for line.
 *
 * Request budget of the node's hot paths: ADD = 1 Query on the claimable index + 1 UpdateItem (the CNI skips
 * findByHolder with its local journal); DEL with the address known = 1 UpdateItem.
 */
export class DynamoLeaseStore implements LeaseStore {
  private readonly api: DynamoApi;
  private readonly table: string;
  private readonly putConcurrency: number;
  private readonly t: LeaseTable;
  private readonly onIllFormed: IllFormedHandler;
  private readonly nodes: DynamoNodeItems;
  private readonly index: DynamoNodeIndex;
  private readonly pass: DynamoPassMarker;

  constructor(options: DynamoLeaseStoreOptions) {
    this.api = options.api;
    this.table = options.tableName;
    this.putConcurrency = Math.max(1, options.putConcurrency ?? 16);
    this.onIllFormed = options.onIllFormedItem ?? (() => {});
    this.t = new LeaseTable({
      api: options.api,
      tableName: options.tableName,
      batchRetries: options.batchRetries ?? 8,
      sleep: options.sleep ?? sleepMs,
      random: options.random ?? Math.random,
    });
    this.nodes = new DynamoNodeItems(options.api, options.tableName);
    this.index = new DynamoNodeIndex({
      api: options.api,
      tableName: options.tableName,
      nodes: this.nodes,
      readConcurrency: this.putConcurrency,
      onIllFormed: this.onIllFormed,
    });
    this.pass = new DynamoPassMarker(options.api, options.tableName);
  }

  async putLeases(leases: readonly NewLease[], nowMs: number): Promise<void> {
    leaseStoreChecks.putLeases(leases, nowMs);
    // Not BatchWriteItem: its puts are unconditional, so a resumed or duplicated launch would overwrite a
    // lease a pod has CLAIMED since, back to FREE — and hand its address to a second pod. One conditional
    // PutItem per lease (`attribute_not_exists`) costs the same write units and keeps what is there.
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < leases.length) {
        const lease = leases[next++]!;
        await guard(`put lease ${lease.ip} of`, lease.instanceArn, async () => {
          try {
            await this.api.putItem({
              TableName: this.table,
              Item: encodeNewLease(lease, nowMs),
              ConditionExpression: `attribute_not_exists(${A.sk})`,
            });
          } catch (err) {
            if (!isConditionalCheckFailed(err)) throw err;
          }
        });
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.putConcurrency, leases.length) }, worker));
  }

  async claim(instanceArn: string, holder: LeaseHolder, nowMs: number, options: ClaimOptions = {}): Promise<Lease> {
    leaseStoreChecks.claim(instanceArn, holder, nowMs, options);
    const { candidates = CLAIM_DEFAULTS.candidates, maxAttempts = CLAIM_DEFAULTS.maxAttempts } = options;
    return guard('claim a lease on', instanceArn, async () => {
      const filter = {
        ...(options.family ? { family: options.family } : {}),
        ...(options.eniId ? { eniId: options.eniId } : {}),
      };
      if (options.checkExisting ?? true) {
        const existing = await this.t.queryHolder(instanceArn, holder, options.family);
        if (existing) return existing;
      }
      // Addresses we lost a race on (claimed by a concurrent ADD between our Query and our write): skipping
      // them keeps every further attempt on a new address, and their count bounds the attempts.
      const lost = new Set<string>();
      for (;;) {
        const pick = await this.t.pickCandidate(instanceArn, nowMs, candidates, lost, filter);
        if (!pick) throw new NoFreeLeaseError(instanceArn);
        try {
          return await this.t.claimItem(instanceArn, pick.ip, pick.version, holder, nowMs);
        } catch (err) {
          if (!isConditionalCheckFailed(err)) throw err;
          lost.add(pick.ip);
          if (lost.size >= maxAttempts) {
            // Out of attempts: say "none left" rather than "contention" when that is the truth.
            if (!(await this.t.pickCandidate(instanceArn, nowMs, 1, lost, filter)))
              throw new NoFreeLeaseError(instanceArn);
            throw new LeaseConflictError(
              `failed to claim a lease on ${instanceArn}: lost ${lost.size} races in a row (${[...lost].join(', ')})`,
            );
          }
        }
      }
    });
  }

  async findByHolder(
    instanceArn: string,
    containerId: string,
    ifName: string,
    family?: IpFamily,
  ): Promise<Lease | undefined> {
    leaseStoreChecks.findByHolder(instanceArn, containerId, ifName, family);
    return guard('find the lease of', `${containerId}/${ifName}`, () =>
      this.t.queryHolder(instanceArn, { containerId, ifName }, family),
    );
  }

  async release(
    instanceArn: string,
    holder: HolderRef,
    nowMs: number,
    reuseWaitMs: number,
    ip?: string,
  ): Promise<Lease | undefined> {
    leaseStoreChecks.release(instanceArn, holder, nowMs, reuseWaitMs, ip);
    return guard('release the lease of', `${holder.containerId}/${holder.ifName}`, async () => {
      let address = ip;
      if (address === undefined) {
        const held = await this.t.queryHolder(instanceArn, holder);
        if (!held) return undefined;
        address = held.ip;
      }
      try {
        const out = await this.api.updateItem({
          TableName: this.table,
          Key: leaseKey(instanceArn, address),
          UpdateExpression:
            `SET ${A.state} = :cooldown, ${A.releasedAt} = :now, ${A.cAt} = :reusableAt, ` +
            `${A.version} = ${A.version} + :one REMOVE ${HOLDER_ATTRS.join(', ')}`,
          ConditionExpression: `${A.state} = :claimed AND ${A.containerId} = :hc AND ${A.ifName} = :hi`,
          ExpressionAttributeValues: {
            ':cooldown': str('COOLDOWN'),
            ':claimed': str('CLAIMED'),
            ':now': num(nowMs),
            ':reusableAt': num(nowMs + reuseWaitMs),
            ':one': num(1),
            ':hc': str(holder.containerId),
            ':hi': str(holder.ifName),
          },
          ReturnValues: 'ALL_NEW',
        });
        return decodeLease(out.Attributes as Item);
      } catch (err) {
        // Not CLAIMED by this holder — released already (a repeated DEL), never claimed, or gone: all mean
        // "nothing to release". Telling them apart would cost a read on every repeated DEL, and the answer
        // would be the same.
        if (isConditionalCheckFailed(err)) return undefined;
        throw err;
      }
    });
  }

  async markReleasing(instanceArn: string, ip: string, nowMs: number, freeSinceBeforeMs?: number): Promise<Lease> {
    leaseStoreChecks.markReleasing(instanceArn, ip, nowMs, freeSinceBeforeMs);
    const values: Item = {
      ':free': str('FREE'),
      ':cooldown': str('COOLDOWN'),
      ':releasing': str('RELEASING'),
      ':now': num(nowMs),
      ':one': num(1),
    };
    // "Free since": cAt is when the lease became claimable (put, release + cooldown, revert).
    let claimable = `${A.state} IN (:free, :cooldown)`;
    if (freeSinceBeforeMs !== undefined) {
      claimable += ` AND ${A.cAt} <= :before`;
      values[':before'] = num(freeSinceBeforeMs);
    }
    return guard(`mark RELEASING lease ${ip} of`, instanceArn, () =>
      this.t.conditionalUpdate(instanceArn, ip, 'mark RELEASING', {
        TableName: this.table,
        Key: leaseKey(instanceArn, ip),
        UpdateExpression:
          `SET ${A.state} = :releasing, ${A.releasedAt} = :now, ${A.version} = ${A.version} + :one ` +
          `REMOVE ${A.cAt}`,
        // The second clause makes a retried request (its response lost after it succeeded) succeed again
        // instead of stranding the lease in RELEASING with no one to finish the handshake.
        ConditionExpression: `(${claimable}) OR (${A.state} = :releasing AND ${A.releasedAt} = :now)`,
        ExpressionAttributeValues: values,
        ReturnValues: 'ALL_NEW',
      }),
    );
  }

  async revertReleasing(instanceArn: string, ip: string, nowMs: number): Promise<Lease> {
    leaseStoreChecks.revertReleasing(instanceArn, ip, nowMs);
    return guard(`revert RELEASING lease ${ip} of`, instanceArn, () =>
      this.t.conditionalUpdate(instanceArn, ip, 'revert RELEASING', {
        TableName: this.table,
        Key: leaseKey(instanceArn, ip),
        UpdateExpression: `SET ${A.state} = :free, ${A.cAt} = :now, ${A.version} = ${A.version} + :one`,
        ConditionExpression: `${A.state} = :releasing`,
        ExpressionAttributeValues: {
          ':free': str('FREE'),
          ':releasing': str('RELEASING'),
          ':now': num(nowMs),
          ':one': num(1),
        },
        ReturnValues: 'ALL_NEW',
      }),
    );
  }

  async deleteReleasing(instanceArn: string, ip: string): Promise<void> {
    leaseStoreChecks.deleteReleasing(instanceArn, ip);
    await guard(`delete RELEASING lease ${ip} of`, instanceArn, async () => {
      try {
        await this.api.deleteItem({
          TableName: this.table,
          Key: leaseKey(instanceArn, ip),
          ConditionExpression: `attribute_not_exists(${A.sk}) OR ${A.state} = :releasing`,
          ExpressionAttributeValues: { ':releasing': str('RELEASING') },
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        });
      } catch (err) {
        if (!isConditionalCheckFailed(err)) throw err;
        const current = await this.t.getLeaseItem(instanceArn, ip, err);
        throw new LeaseConflictError(
          `failed to delete lease ${ip} of ${instanceArn}: it is ${current?.state ?? 'gone'}, not RELEASING`,
          current,
        );
      }
    });
  }

  async deleteNodePartition(instanceArn: string): Promise<number> {
    leaseStoreChecks.deleteNodePartition(instanceArn);
    return guard('delete the partition of', instanceArn, async () => {
      const keys = await this.t.queryAll({
        KeyConditionExpression: `${A.pk} = :pk`,
        ExpressionAttributeValues: { ':pk': str(instanceArn) },
        ProjectionExpression: `${A.pk}, ${A.sk}`,
        ConsistentRead: true,
      });
      for (let i = 0; i < keys.length; i += BATCH_SIZE) {
        await this.t.batchDelete(keys.slice(i, i + BATCH_SIZE));
      }
      return keys.length;
    });
  }

  async getLease(instanceArn: string, ip: string): Promise<Lease | undefined> {
    leaseStoreChecks.getLease(instanceArn, ip);
    return guard(`read lease ${ip} of`, instanceArn, () => this.t.getLeaseItem(instanceArn, ip));
  }

  async listLeases(instanceArn: string, filter: { state?: LeaseState; eventual?: boolean } = {}): Promise<Lease[]> {
    leaseStoreChecks.listLeases(instanceArn, filter);
    const values: Item = { ':pk': str(instanceArn), ':prefix': str(LEASE_SORT_PREFIX) };
    if (filter.state) values[':state'] = str(filter.state);
    return guard('list the leases of', instanceArn, () =>
      this.t
        .queryAll(
          {
            KeyConditionExpression: `${A.pk} = :pk AND begins_with(${A.sk}, :prefix)`,
            ...(filter.state ? { FilterExpression: `${A.state} = :state` } : {}),
            ExpressionAttributeValues: values,
            ConsistentRead: filter.eventual !== true,
          },
          false,
          { bytes: PARTITION_READ_MAX_BYTES, instanceArn },
        )
        .then((items) => decodeEach(items, decodeLease, this.onIllFormed)),
    );
  }

  async countClaimable(instanceArn: string, nowMs: number): Promise<number> {
    leaseStoreChecks.countClaimable(instanceArn, nowMs);
    return guard('count the claimable leases of', instanceArn, async () => {
      let count = 0;
      const pages = this.t.queryPages(
        {
          IndexName: CLAIMABLE_INDEX.name,
          KeyConditionExpression: `${A.pk} = :arn AND ${A.cAt} <= :now`,
          // A node could put `cAt` on its own node item; count leases only.
          FilterExpression: `begins_with(${A.sk}, :prefix)`,
          ExpressionAttributeValues: {
            ':arn': str(instanceArn),
            ':now': num(nowMs),
            ':prefix': str(LEASE_SORT_PREFIX),
          },
          Select: 'COUNT',
        },
        { bytes: PARTITION_READ_MAX_BYTES, instanceArn },
      );
      for await (const page of pages) count += page.Count ?? 0;
      return count;
    });
  }

  async getNode(instanceArn: string, read: { eventual?: boolean } = {}): Promise<NodeRecord | undefined> {
    leaseStoreChecks.getNode(instanceArn, read);
    return this.nodes.getNode(instanceArn, read);
  }

  async createNode(node: NodeRecord): Promise<boolean> {
    leaseStoreChecks.createNode(node);
    return this.nodes.createNode(node);
  }

  async updateNode(next: NodeRecord, expectedVersion: number): Promise<NodeRecord> {
    leaseStoreChecks.updateNode(next, expectedVersion);
    return this.nodes.updateNode(next, expectedVersion);
  }

  async listNodes(): Promise<NodeRecord[]> {
    leaseStoreChecks.listNodes();
    return this.index.listNodes();
  }

  async listNodeRefs(from?: NodeCursor, limit?: number): Promise<NodeRefPage> {
    leaseStoreChecks.listNodeRefs(from, limit);
    return this.index.listNodeRefs(from, limit);
  }

  async acquirePassMarker(instanceArn: string, owner: string, nowMs: number, ttlMs: number): Promise<boolean> {
    leaseStoreChecks.acquirePassMarker(instanceArn, owner, nowMs, ttlMs);
    return this.pass.acquire(instanceArn, owner, nowMs, ttlMs);
  }

  async releasePassMarker(instanceArn: string, owner: string): Promise<void> {
    leaseStoreChecks.releasePassMarker(instanceArn, owner);
    return this.pass.release(instanceArn, owner);
  }
}
