import type { RemovalPolicy } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type { Construct } from 'constructs';
import { NODE_WRITABLE_ATTRS } from '../../shared/lease-store/item-codec.js';
import { createTableInput, LEASE_TABLE_GENERATION } from '../../shared/lease-store/table.js';

export interface LeaseTableOptions {
  /** The operator's name for the table; the generation suffix (`-v2`) is appended. */
  readonly tableName: string | undefined;
  readonly removalPolicy: RemovalPolicy;
  readonly deletionProtection: boolean;
}

/** Logical id of the table of this generation: a new id makes CloudFormation create a new table. */
export function leaseTableId(id: string): string {
  return `${id}V${LEASE_TABLE_GENERATION}`;
}

/**
 * The lease table, declared from the same CreateTable input the local cloud uses (shared/lease-store/table.ts),
 * so keys, the claimable index and the stream view cannot drift between dynalite and AWS.
 *
 * A local secondary index can only be created with its table, so each schema generation is a new resource
 * (logical id `LeasesV2`, physical name `<tableName>-v2`) instead of an in-place update CloudFormation would
 * refuse; the previous table leaves the template under the removal policy it was deployed with (RETAIN by
 * default) and docs/DEPLOY.md says how a deployment moves over.
 */
export function createLeaseTable(scope: Construct, id: string, options: LeaseTableOptions): dynamodb.Table {
  const shape = createTableInput('shape-only');
  const attributeType = (name: string | undefined): dynamodb.Attribute => {
    const def = shape.AttributeDefinitions?.find((a) => a.AttributeName === name);
    if (name === undefined || def === undefined) throw new Error(`lease table shape has no attribute ${name}`);
    return { name, type: def.AttributeType as dynamodb.AttributeType };
  };
  const keyOf = (schema: typeof shape.KeySchema, kind: 'HASH' | 'RANGE'): dynamodb.Attribute =>
    attributeType(schema?.find((k) => k.KeyType === kind)?.AttributeName);

  const table = new dynamodb.Table(scope, leaseTableId(id), {
    tableName: options.tableName === undefined ? undefined : `${options.tableName}-v${LEASE_TABLE_GENERATION}`,
    partitionKey: keyOf(shape.KeySchema, 'HASH'),
    sortKey: keyOf(shape.KeySchema, 'RANGE'),
    billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
    pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
    encryption: dynamodb.TableEncryption.AWS_MANAGED,
    stream: shape.StreamSpecification?.StreamViewType as dynamodb.StreamViewType,
    removalPolicy: options.removalPolicy,
    deletionProtection: options.deletionProtection,
  });
  for (const gsi of shape.GlobalSecondaryIndexes ?? []) {
    // A global index keyed on anything a node can write would let one node fill another's view (issue 14).
    const writable = (gsi.KeySchema ?? []).filter(
      (k) => k.KeyType === 'HASH' && (NODE_WRITABLE_ATTRS as readonly string[]).includes(k.AttributeName ?? ''),
    );
    if (writable.length > 0 || gsi.IndexName === undefined)
      throw new Error(`lease table global index ${gsi.IndexName} is keyed on a node-writable attribute`);
    table.addGlobalSecondaryIndex({
      indexName: gsi.IndexName,
      partitionKey: keyOf(gsi.KeySchema, 'HASH'),
      sortKey: keyOf(gsi.KeySchema, 'RANGE'),
      projectionType: gsi.Projection?.ProjectionType as dynamodb.ProjectionType,
      ...(gsi.Projection?.NonKeyAttributes ? { nonKeyAttributes: gsi.Projection.NonKeyAttributes } : {}),
    });
  }
  for (const lsi of shape.LocalSecondaryIndexes ?? []) {
    if (lsi.IndexName === undefined) continue;
    table.addLocalSecondaryIndex({
      indexName: lsi.IndexName,
      sortKey: keyOf(lsi.KeySchema, 'RANGE'),
      projectionType: lsi.Projection?.ProjectionType as dynamodb.ProjectionType,
    });
  }
  return table;
}
