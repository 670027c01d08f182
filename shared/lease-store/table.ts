import type { CreateTableCommandInput } from '@aws-sdk/client-dynamodb';

/**
 * The one table of vpc-lease. Partition = the instance ARN (so IAM's `dynamodb:LeadingKeys =
 * ${ec2:SourceInstanceARN}` confines a node to its own items); sort = `ip#<address>` for leases, `node` for the
 * node item. The CDK construct and the local cloud both build the table from these names.
 */
export const TABLE_KEYS = {
  partitionKey: 'pk',
  sortKey: 'sk',
} as const;

/**
 * Sparse local secondary index over claimable leases: `cAt` (= reusableAtMs) is present only while a lease is
 * FREE or COOLDOWN, so ADD finds candidates with one Query (`pk = arn AND cAt <= now`) and a RELEASING or CLAIMED
 * lease is not in it. Local, keyed on the table's own partition key: `dynamodb:LeadingKeys` then confines what a
 * node's index Query can return to its own items (a global index on a node-written key would let one node
 * fill another's view).
 */
export const CLAIMABLE_INDEX = {
  name: 'claimable',
  partitionKey: TABLE_KEYS.partitionKey,
  sortKey: 'cAt',
} as const;

/**
 * Sparse global index over node items only, so the schedules find every node without reading a lease. Keyed
 * on `nsh`, which only the control plane's node-item codec writes: it is not in NODE_WRITABLE_ATTRS, so the
 * node policy refuses any node write naming it and no node can put an item into this index (a node-writable
 * key would let one node fill another's view). A GSI rather than a sharded registry of node ids: DynamoDB
 * keeps it in step with the node item on every write, with no second write to forget or undo. 16 shards keep
 * a scale-out's node-item writes off one index partition; the sort key is the instance ARN, so a sweep can
 * stop at any node and carry on after it. Eventually consistent (a GSI refuses ConsistentRead): readers act
 * only after a consistent read of the node item itself.
 */
export const NODE_INDEX = {
  name: 'nodes',
  partitionKey: 'nsh',
  sortKey: TABLE_KEYS.partitionKey,
  shards: 16,
  /** What the schedules decide on (phase, instance id, times, version): ~150 bytes a node, not its ENI list. */
  projected: ['ph', 'iid', 'ca', 'ua', 'gs', 'nv'],
} as const;

/** The node index's key value for one instance ARN: `nodes#<nodeIndexShardNumber>`. */
export function nodeIndexShard(instanceArn: string): string {
  return `nodes#${nodeIndexShardNumber(instanceArn)}`;
}

/** The shard one instance ARN falls in: a stable hash of the ARN into NODE_INDEX.shards. */
export function nodeIndexShardNumber(instanceArn: string): number {
  let h = 0;
  for (let i = 0; i < instanceArn.length; i++) h = (Math.imul(h, 31) + instanceArn.charCodeAt(i)) >>> 0;
  return h % NODE_INDEX.shards;
}

export function nodeIndexShards(): string[] {
  return Array.from({ length: NODE_INDEX.shards }, (_, i) => `nodes#${i}`);
}

/**
 * The table's schema generation. 2 = the claimable index is local; an index kind cannot change in
 * place, so a new generation is a new table (docs/DEPLOY.md, "Moving to lease table v2").
 */
export const LEASE_TABLE_GENERATION = 2;

export const NODE_SORT_KEY = 'node';
/** The node's assignment-pass marker (one pool pass at a time may assign addresses on a node). */
export const PASS_MARKER_SORT_KEY = 'pass';
export const LEASE_SORT_PREFIX = 'ip#';

export function leaseSortKey(ip: string): string {
  return `${LEASE_SORT_PREFIX}${ip}`;
}

/** The table as CreateTable takes it (local cloud, tests). The CDK construct declares the same shape. */
export function createTableInput(tableName: string): CreateTableCommandInput {
  return {
    TableName: tableName,
    BillingMode: 'PAY_PER_REQUEST',
    AttributeDefinitions: [
      { AttributeName: TABLE_KEYS.partitionKey, AttributeType: 'S' },
      { AttributeName: TABLE_KEYS.sortKey, AttributeType: 'S' },
      { AttributeName: CLAIMABLE_INDEX.sortKey, AttributeType: 'N' },
      { AttributeName: NODE_INDEX.partitionKey, AttributeType: 'S' },
    ],
    KeySchema: [
      { AttributeName: TABLE_KEYS.partitionKey, KeyType: 'HASH' },
      { AttributeName: TABLE_KEYS.sortKey, KeyType: 'RANGE' },
    ],
    LocalSecondaryIndexes: [
      {
        IndexName: CLAIMABLE_INDEX.name,
        KeySchema: [
          { AttributeName: CLAIMABLE_INDEX.partitionKey, KeyType: 'HASH' },
          { AttributeName: CLAIMABLE_INDEX.sortKey, KeyType: 'RANGE' },
        ],
        // ALL: a Query of the index never fetches from the table, so the node policy can allow the index's
        // Select values without a second read path.
        Projection: { ProjectionType: 'ALL' },
      },
    ],
    GlobalSecondaryIndexes: [
      {
        IndexName: NODE_INDEX.name,
        KeySchema: [
          { AttributeName: NODE_INDEX.partitionKey, KeyType: 'HASH' },
          { AttributeName: NODE_INDEX.sortKey, KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'INCLUDE', NonKeyAttributes: [...NODE_INDEX.projected] },
      },
    ],
    StreamSpecification: { StreamEnabled: true, StreamViewType: 'NEW_AND_OLD_IMAGES' },
  };
}
