import {
  BatchWriteItemCommand,
  DeleteItemCommand,
  DynamoDBClient,
  type DynamoDBClientConfig,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  ScanCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import type { DynamoApi } from './api.js';

/**
 * DynamoApi over the AWS SDK v3 client (Lambdas, CLI, local cloud). The SDK already honours
 * AWS_ENDPOINT_URL_DYNAMODB and retries throttling with its standard strategy; its exceptions keep their
 * DynamoDB `name`, which is what the lease store matches on.
 */
export class SdkDynamoApi implements DynamoApi {
  constructor(readonly client: DynamoDBClient) {}

  readonly getItem: DynamoApi['getItem'] = (input) => this.client.send(new GetItemCommand(input));
  readonly putItem: DynamoApi['putItem'] = (input) => this.client.send(new PutItemCommand(input));
  readonly updateItem: DynamoApi['updateItem'] = (input) => this.client.send(new UpdateItemCommand(input));
  readonly deleteItem: DynamoApi['deleteItem'] = (input) => this.client.send(new DeleteItemCommand(input));
  readonly query: DynamoApi['query'] = (input) => this.client.send(new QueryCommand(input));
  readonly scan: DynamoApi['scan'] = (input) => this.client.send(new ScanCommand(input));
  readonly batchWriteItem: DynamoApi['batchWriteItem'] = (input) => this.client.send(new BatchWriteItemCommand(input));
}

/** A DynamoDB client and its DynamoApi; `config` is passed to DynamoDBClient unchanged. */
export function createSdkDynamoApi(config: DynamoDBClientConfig = {}): SdkDynamoApi {
  return new SdkDynamoApi(new DynamoDBClient(config));
}
