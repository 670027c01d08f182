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
 * The table's schema generation. 2 = the claimable index is local; an index kind cannot change in
 * place, so a new generation is a new table (infra/DEPLOY.md, "Moving to lease table v2").
 */
export const LEASE_TABLE_GENERATION = 2;

export const NODE_SORT_KEY = 'node';
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
    StreamSpecification: { StreamEnabled: true, StreamViewType: 'NEW_AND_OLD_IMAGES' },
  };
}
