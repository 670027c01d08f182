import { CreateTableCommand, DescribeTableCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { StoreUnavailableError } from '../errors.js';
import { sleepMs } from '../sleep.js';
import { createTableInput } from './table.js';

/**
 * Creates the table of table.ts when it is missing and waits until it and its index are ACTIVE — for tests and
 * the local cloud (in AWS the CDK construct owns the table). CreateTable is not part of DynamoApi, so this
 * takes the SDK client. Returns whether it created the table.
 */
export async function ensureTable(
  client: DynamoDBClient,
  tableName: string,
  options: { timeoutMs?: number; pollMs?: number } = {},
): Promise<boolean> {
  let created = false;
  if (!(await describe(client, tableName))) {
    try {
      await client.send(new CreateTableCommand(createTableInput(tableName)));
      created = true;
    } catch (err) {
      // Another process created it between our DescribeTable and CreateTable.
      if (!(err instanceof Error && err.name === 'ResourceInUseException')) throw err;
    }
  }
  const deadline = Date.now() + (options.timeoutMs ?? 60_000);
  for (;;) {
    const table = await describe(client, tableName);
    const indexesActive = (table?.GlobalSecondaryIndexes ?? []).every((i) => i.IndexStatus === 'ACTIVE');
    if (table?.TableStatus === 'ACTIVE' && indexesActive) return created;
    if (Date.now() > deadline)
      throw new StoreUnavailableError(`failed to create table ${tableName}: not ACTIVE in time`);
    await sleepMs(options.pollMs ?? 200);
  }
}

async function describe(client: DynamoDBClient, tableName: string) {
  try {
    return (await client.send(new DescribeTableCommand({ TableName: tableName }))).Table;
  } catch (err) {
    if (err instanceof Error && err.name === 'ResourceNotFoundException') return undefined;
    throw err;
  }
}
