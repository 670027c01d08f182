import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll } from 'vitest';
import { ensureTable } from '../../shared/lease-store/ensure-table.js';
import { type DynaliteHandle, startDynalite } from '../support/dynalite.js';

/**
 * One dynalite per suite file, found by the clients through AWS_ENDPOINT_URL_DYNAMODB exactly as in the local
 * cloud; every call of `freshTable()` creates a new table so tests never see each other's items.
 */
export interface DynaliteEnv {
  readonly endpoint: () => string;
  readonly sdkClient: () => DynamoDBClient;
  freshTable(): Promise<string>;
}

export function useDynalite(): DynaliteEnv {
  let server: DynaliteHandle | undefined;
  let client: DynamoDBClient | undefined;
  let tables = 0;
  const saved = { ...process.env };

  beforeAll(async () => {
    server = await startDynalite();
    process.env['AWS_ENDPOINT_URL_DYNAMODB'] = server.endpoint;
    process.env['AWS_REGION'] = 'eu-west-1';
    process.env['AWS_ACCESS_KEY_ID'] = 'AKIDLOCAL';
    process.env['AWS_SECRET_ACCESS_KEY'] = 'local-secret';
    delete process.env['AWS_SESSION_TOKEN'];
    delete process.env['AWS_PROFILE'];
    client = new DynamoDBClient({});
  });

  afterAll(async () => {
    client?.destroy();
    await server?.close();
    for (const key of Object.keys(process.env)) if (!(key in saved)) delete process.env[key];
    Object.assign(process.env, saved);
  });

  return {
    endpoint: () => server!.endpoint,
    sdkClient: () => client!,
    async freshTable() {
      tables += 1;
      const name = `leases-${process.pid}-${tables}`;
      await ensureTable(client!, name, { pollMs: 10 });
      return name;
    },
  };
}
