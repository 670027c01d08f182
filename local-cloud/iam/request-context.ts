import { partitionKeyPlaceholder, projectedAttributes, updatedAttributes } from './expressions.js';

/** Key attribute names of a table and of each of its secondary indexes. */
export interface KeySchema {
  readonly partitionKey: string;
  readonly sortKey?: string;
}

export interface TableSchema extends KeySchema {
  readonly indexes: Readonly<Record<string, KeySchema>>;
}

export type ContextValue = string | readonly string[];

/** One authorization IAM makes for a request: a batch or transaction makes one per table or per item. */
export interface IamRequest {
  readonly action: string;
  readonly resource: string;
  readonly context: Readonly<Record<string, ContextValue>>;
}

export interface RequestScope {
  readonly region: string;
  readonly accountId: string;
  readonly partition?: string;
  schemaOf(tableName: string): Promise<TableSchema | undefined>;
}

type AttributeValue = Readonly<Record<string, unknown>>;
type Item = Readonly<Record<string, AttributeValue>>;
// The DynamoDB JSON request body: open-ended, read field by field.
type Body = Readonly<Record<string, unknown>>;

/** The scalar of a key attribute as IAM compares it (S and N as written, B as its base64). */
function scalar(value: AttributeValue | undefined): string | undefined {
  if (!value) return undefined;
  for (const t of ['S', 'N', 'B']) if (typeof value[t] === 'string') return value[t] as string;
  return undefined;
}

function tableArn(scope: RequestScope, table: string): string {
  if (table.startsWith('arn:')) return table;
  return `arn:${scope.partition ?? 'aws'}:dynamodb:${scope.region}:${scope.accountId}:table/${table}`;
}

function tableNameOf(table: string): string {
  return table.startsWith('arn:') ? table.slice(table.indexOf(':table/') + 7).split('/')[0]! : table;
}

function keyNames(schema: KeySchema | undefined): string[] {
  return schema ? [schema.partitionKey, ...(schema.sortKey ? [schema.sortKey] : [])] : [];
}

function leadingKey(key: Item | undefined, schema: TableSchema | undefined): string[] {
  const v = schema ? scalar(key?.[schema.partitionKey]) : undefined;
  return v === undefined ? [] : [v];
}

function names(body: Body): Readonly<Record<string, string>> | undefined {
  return body['ExpressionAttributeNames'] as Record<string, string> | undefined;
}

function readAttributes(body: Body): string[] | undefined {
  if (typeof body['ProjectionExpression'] === 'string')
    return projectedAttributes(body['ProjectionExpression'] as string, names(body));
  if (Array.isArray(body['AttributesToGet'])) return body['AttributesToGet'] as string[];
  return undefined;
}

/**
 * Context keys of a read: `dynamodb:Attributes` from the projection, `dynamodb:Select` from the request's
 * Select (SPECIFIC_ATTRIBUTES when only a projection is given). A request naming neither carries no Select:
 * AWS documents the key as the request's Select parameter, and the policy pairs it with `IfExists`.
 */
function readContext(body: Body): Record<string, ContextValue> {
  const attributes = readAttributes(body);
  const select = (body['Select'] as string | undefined) ?? (attributes ? 'SPECIFIC_ATTRIBUTES' : undefined);
  return {
    ...(select ? { 'dynamodb:Select': select } : {}),
    ...(attributes ? { 'dynamodb:Attributes': attributes } : {}),
  };
}

function writtenAttributes(operation: string, body: Body, schema: TableSchema | undefined): string[] {
  const key = keyNames(schema);
  if (operation === 'PutItem') return Object.keys((body['Item'] as Item | undefined) ?? {});
  if (operation === 'DeleteItem') return key;
  const updated =
    typeof body['UpdateExpression'] === 'string'
      ? updatedAttributes(body['UpdateExpression'] as string, names(body))
      : Object.keys((body['AttributeUpdates'] as Item | undefined) ?? {});
  return [...new Set([...key, ...updated])];
}

function withValue(context: Record<string, ContextValue>, key: string, value: unknown): void {
  if (typeof value === 'string') context[key] = value;
}

/** An item write (Put/Update/Delete), alone or inside TransactWriteItems. */
function itemWrite(operation: string, body: Body, schema: TableSchema | undefined, scope: RequestScope): IamRequest {
  const table = body['TableName'] as string;
  const keys =
    operation === 'PutItem' ? leadingKey(body['Item'] as Item, schema) : leadingKey(body['Key'] as Item, schema);
  const context: Record<string, ContextValue> = {
    'dynamodb:LeadingKeys': keys,
    'dynamodb:Attributes': writtenAttributes(operation, body, schema),
  };
  withValue(context, 'dynamodb:ReturnValues', body['ReturnValues']);
  return { action: `dynamodb:${operation}`, resource: tableArn(scope, table), context };
}

const TRANSACT_WRITE: Readonly<Record<string, string>> = {
  Put: 'PutItem',
  Update: 'UpdateItem',
  Delete: 'DeleteItem',
  ConditionCheck: 'ConditionCheckItem',
};

/**
 * What IAM authorizes for one DynamoDB JSON request: the action, the table or index ARN, and the
 * fine-grained context keys (`dynamodb:LeadingKeys` from the key or the key condition, `dynamodb:Attributes`,
 * `dynamodb:Select`, `dynamodb:ReturnValues`). Operations it does not know get the action and table alone.
 */
export async function iamRequestsOf(operation: string, body: Body, scope: RequestScope): Promise<IamRequest[]> {
  const schema = async (table: unknown): Promise<TableSchema | undefined> =>
    typeof table === 'string' ? scope.schemaOf(tableNameOf(table)) : undefined;
  const table = body['TableName'] as string | undefined;
  switch (operation) {
    case 'GetItem': {
      const s = await schema(table);
      return [
        {
          action: 'dynamodb:GetItem',
          resource: tableArn(scope, table ?? ''),
          context: {
            'dynamodb:LeadingKeys': leadingKey(body['Key'] as Item, s),
            ...readContext(body),
          },
        },
      ];
    }
    case 'PutItem':
    case 'UpdateItem':
    case 'DeleteItem':
      return [itemWrite(operation, body, await schema(table), scope)];
    case 'Query': {
      const s = await schema(table);
      const index = body['IndexName'] as string | undefined;
      const keySchema = index ? s?.indexes[index] : s;
      let keys: string[] = [];
      if (keySchema && typeof body['KeyConditionExpression'] === 'string') {
        const placeholder = partitionKeyPlaceholder(
          body['KeyConditionExpression'] as string,
          names(body),
          keySchema.partitionKey,
        );
        const values = body['ExpressionAttributeValues'] as Item | undefined;
        const v = placeholder ? scalar(values?.[placeholder]) : undefined;
        if (v !== undefined) keys = [v];
      } else if (keySchema && body['KeyConditions']) {
        const cond = (
          body['KeyConditions'] as Record<
            string,
            { ComparisonOperator?: string; AttributeValueList?: AttributeValue[] }
          >
        )[keySchema.partitionKey];
        const v = cond?.ComparisonOperator === 'EQ' ? scalar(cond.AttributeValueList?.[0]) : undefined;
        if (v !== undefined) keys = [v];
      }
      const resource = `${tableArn(scope, table ?? '')}${index ? `/index/${index}` : ''}`;
      const context = {
        'dynamodb:LeadingKeys': keys,
        ...readContext(body),
      };
      return [{ action: 'dynamodb:Query', resource, context }];
    }
    case 'Scan': {
      const index = body['IndexName'] as string | undefined;
      const resource = `${tableArn(scope, table ?? '')}${index ? `/index/${index}` : ''}`;
      return [{ action: 'dynamodb:Scan', resource, context: readContext(body) }];
    }
    case 'BatchWriteItem': {
      const out: IamRequest[] = [];
      const items = (body['RequestItems'] ?? {}) as Record<
        string,
        { PutRequest?: { Item: Item }; DeleteRequest?: { Key: Item } }[]
      >;
      for (const [name, writes] of Object.entries(items)) {
        const s = await schema(name);
        const keys = writes.flatMap((w) => leadingKey(w.PutRequest?.Item ?? w.DeleteRequest?.Key, s));
        const attributes = writes.flatMap((w) => Object.keys(w.PutRequest?.Item ?? w.DeleteRequest?.Key ?? {}));
        out.push({
          action: 'dynamodb:BatchWriteItem',
          resource: tableArn(scope, name),
          context: { 'dynamodb:LeadingKeys': keys, 'dynamodb:Attributes': [...new Set(attributes)] },
        });
      }
      return out;
    }
    case 'BatchGetItem': {
      const out: IamRequest[] = [];
      const items = (body['RequestItems'] ?? {}) as Record<string, Body & { Keys?: Item[] }>;
      for (const [name, read] of Object.entries(items)) {
        const s = await schema(name);
        out.push({
          action: 'dynamodb:BatchGetItem',
          resource: tableArn(scope, name),
          context: {
            'dynamodb:LeadingKeys': (read.Keys ?? []).flatMap((k) => leadingKey(k, s)),
            ...readContext(read),
          },
        });
      }
      return out;
    }
    case 'TransactWriteItems': {
      const out: IamRequest[] = [];
      for (const entry of (body['TransactItems'] ?? []) as Record<string, Body>[]) {
        for (const [kind, op] of Object.entries(TRANSACT_WRITE)) {
          const inner = entry[kind];
          if (!inner) continue;
          const request = itemWrite(op, inner, await schema(inner['TableName']), scope);
          out.push({
            ...request,
            context: { ...request.context, 'dynamodb:EnclosingOperation': 'TransactWriteItems' },
          });
        }
      }
      return out;
    }
    case 'TransactGetItems': {
      const out: IamRequest[] = [];
      for (const entry of (body['TransactItems'] ?? []) as { Get?: Body }[]) {
        if (!entry.Get) continue;
        const s = await schema(entry.Get['TableName']);
        out.push({
          action: 'dynamodb:GetItem',
          resource: tableArn(scope, (entry.Get['TableName'] as string) ?? ''),
          context: {
            'dynamodb:LeadingKeys': leadingKey(entry.Get['Key'] as Item, s),
            'dynamodb:EnclosingOperation': 'TransactGetItems',
            ...readContext(entry.Get),
          },
        });
      }
      return out;
    }
    default:
      return [{ action: `dynamodb:${operation}`, resource: tableArn(scope, table ?? '*'), context: {} }];
  }
}
