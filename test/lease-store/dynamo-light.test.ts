import { afterAll } from 'vitest';
import { LightDynamoClient } from '../../shared/dynamo/light-client.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import { leaseStoreContract } from './contract.js';
import { useDynalite } from './dynalite-env.js';

const env = useDynalite();
const clients: LightDynamoClient[] = [];

afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
});

leaseStoreContract('DynamoLeaseStore + light client on dynalite', async () => {
  // Endpoint, region and credentials all from the environment, as the CNI binary gets them. A generous
  // timeout: dynalite on a loaded machine can be slow, and these tests are about the store's semantics.
  const api = new LightDynamoClient({ timeoutMs: 30_000 });
  clients.push(api);
  return new DynamoLeaseStore({ api, tableName: await env.freshTable() });
});
