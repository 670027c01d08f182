import { LightDynamoClient } from '../../shared/dynamo/light-client.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import type { LeaseStore } from '../../shared/lease-store/port.js';
import type { PluginConfig } from '../config/netconf.js';
import type { NodeIdentity } from '../identity/identity.js';

/**
 * The node's lease store: the DynamoDB adapter over the light SigV4 client (no AWS SDK in the CNI binary),
 * signed with the identity's credentials — the instance role's, whose policy confines it to the node's own
 * partition (`dynamodb:LeadingKeys = ${ec2:SourceInstanceARN}`).
 */
export function openLeaseStore(config: PluginConfig, identity: NodeIdentity): LeaseStore {
  const credentials = identity.credentials;
  const api = new LightDynamoClient({
    region: config.region ?? identity.document.region,
    ...(config.dynamoEndpoint ? { endpoint: config.dynamoEndpoint } : {}),
    credentials: async () => credentials,
    timeoutMs: config.storeTimeoutMs,
  });
  return new DynamoLeaseStore({ api, tableName: config.tableName });
}
