import { SdkDynamoApi } from '../../shared/dynamo/sdk-client.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import { leaseStoreContract } from './contract.js';
import { useDynalite } from './dynalite-env.js';

const env = useDynalite();

leaseStoreContract(
  'DynamoLeaseStore + AWS SDK client on dynalite',
  async () => new DynamoLeaseStore({ api: new SdkDynamoApi(env.sdkClient()), tableName: await env.freshTable() }),
);
