import type { RemovalPolicy } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type { Construct } from 'constructs';
import { createTableInput } from '../../shared/lease-store/table.js';

export interface LeaseTableOptions {
  readonly tableName: string | undefined;
  readonly removalPolicy: RemovalPolicy;
  readonly deletionProtection: boolean;
}

/**
 * The lease table, declared from the same CreateTable input the local cloud uses (shared/lease-store/table.ts),
 * so keys, the claimable index and the stream view cannot drift between dynalite and AWS.
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

  const table = new dynamodb.Table(scope, id, {
    tableName: options.tableName,
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
    if (gsi.IndexName === undefined) continue;
    table.addGlobalSecondaryIndex({
      indexName: gsi.IndexName,
      partitionKey: keyOf(gsi.KeySchema, 'HASH'),
      sortKey: keyOf(gsi.KeySchema, 'RANGE'),
      projectionType: gsi.Projection?.ProjectionType as dynamodb.ProjectionType,
    });
  }
  return table;
}
