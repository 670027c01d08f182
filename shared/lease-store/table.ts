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
 * Sparse index over claimable leases: `cPk` (= the instance ARN) and `cAt` (= reusableAtMs) are present only
 * while a lease is FREE or COOLDOWN, so ADD finds candidates with one Query (`cAt <= now`) and no Scan, and a
 * RELEASING or CLAIMED lease is simply not in it.
 */
export const CLAIMABLE_INDEX = {
  name: 'claimable',
  partitionKey: 'cPk',
  sortKey: 'cAt',
} as const;

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
      { AttributeName: CLAIMABLE_INDEX.partitionKey, AttributeType: 'S' },
      { AttributeName: CLAIMABLE_INDEX.sortKey, AttributeType: 'N' },
    ],
    KeySchema: [
      { AttributeName: TABLE_KEYS.partitionKey, KeyType: 'HASH' },
      { AttributeName: TABLE_KEYS.sortKey, KeyType: 'RANGE' },
    ],
    GlobalSecondaryIndexes: [
      {
        IndexName: CLAIMABLE_INDEX.name,
        KeySchema: [
          { AttributeName: CLAIMABLE_INDEX.partitionKey, KeyType: 'HASH' },
          { AttributeName: CLAIMABLE_INDEX.sortKey, KeyType: 'RANGE' },
        ],
        // The claim re-reads nothing: the update's condition checks state and version, and the index carries
        // what the candidate choice needs.
        Projection: { ProjectionType: 'ALL' },
      },
    ],
    StreamSpecification: { StreamEnabled: true, StreamViewType: 'NEW_AND_OLD_IMAGES' },
  };
}
