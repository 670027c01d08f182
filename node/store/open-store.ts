import { join } from 'node:path';
import { LightDynamoClient } from '../../shared/dynamo/light-client.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import { LeaseTable } from '../../shared/lease-store/dynamo-lease-table.js';
import type { LeaseStore } from '../../shared/lease-store/port.js';
import { sleepMs } from '../../shared/sleep.js';
import type { PluginConfig } from '../config/netconf.js';
import type { NodeIdentity } from '../identity/identity.js';
import type { AwsCredentials } from '../identity/imds.js';
import { type DynamoRequestObserver, observeDynamo } from '../metrics/observed-dynamo.js';
import { ClaimHints, HintedLeaseStore } from './claim-hints.js';

/**
 * The node's lease store: the DynamoDB adapter over the light SigV4 client (no AWS SDK in the CNI binary),
 * signed with the identity's credentials — the instance role's, whose policy confines it to the node's own
 * partition (`dynamodb:LeadingKeys = ${ec2:SourceInstanceARN}`). Claims try the node's hints of leases it
 * released first (one UpdateItem, no Query; see claim-hints.ts). The agent passes `observe` to time each request.
 */
export function openLeaseStore(
  config: PluginConfig,
  identity: NodeIdentity,
  /** The agent's store outlives one set of role credentials: it asks for the current ones on every request. */
  credentials: () => Promise<AwsCredentials> = async () => identity.credentials,
  observe?: DynamoRequestObserver,
): LeaseStore {
  const client = new LightDynamoClient({
    region: config.region ?? identity.document.region,
    ...(config.dynamoEndpoint ? { endpoint: config.dynamoEndpoint } : {}),
    credentials,
    timeoutMs: config.storeTimeoutMs,
  });
  const api = observe ? observeDynamo(client, observe) : client;
  const store = new DynamoLeaseStore({ api, tableName: config.tableName });
  const table = new LeaseTable({
    api,
    tableName: config.tableName,
    batchRetries: 0,
    sleep: sleepMs,
    random: Math.random,
  });
  return new HintedLeaseStore(store, table, new ClaimHints(join(config.dataDir, 'claim-hints', config.tableName)));
}
