import type {
  BatchWriteItemCommandInput,
  BatchWriteItemCommandOutput,
  CreateTableCommandInput,
  DeleteItemCommandInput,
  DeleteItemCommandOutput,
  GetItemCommandInput,
  GetItemCommandOutput,
  PutItemCommandInput,
  PutItemCommandOutput,
  QueryCommandInput,
  QueryCommandOutput,
  ScanCommandInput,
  ScanCommandOutput,
  UpdateItemCommandInput,
  UpdateItemCommandOutput,
} from '@aws-sdk/client-dynamodb';

/**
 * The DynamoDB operations vpc-lease uses, in the wire shapes of the DynamoDB JSON protocol. Two adapters:
 * the AWS SDK v3 client (Lambdas, CLI) and a small SigV4 node:http client (the CNI binary, whose start-up time is
 * its whole budget, and the SDK is slow to load). Type-only imports: nothing of the SDK is loaded here.
 *
 * Errors: a rejected call throws an Error whose `name` is the DynamoDB error type
 * (e.g. `ConditionalCheckFailedException`, `ResourceNotFoundException`), as the SDK does.
 */
export interface DynamoApi {
  getItem(input: GetItemCommandInput): Promise<Pick<GetItemCommandOutput, 'Item'>>;
  putItem(input: PutItemCommandInput): Promise<Pick<PutItemCommandOutput, 'Attributes'>>;
  updateItem(input: UpdateItemCommandInput): Promise<Pick<UpdateItemCommandOutput, 'Attributes'>>;
  deleteItem(input: DeleteItemCommandInput): Promise<Pick<DeleteItemCommandOutput, 'Attributes'>>;
  query(input: QueryCommandInput): Promise<Pick<QueryCommandOutput, 'Items' | 'LastEvaluatedKey' | 'Count'>>;
  scan(input: ScanCommandInput): Promise<Pick<ScanCommandOutput, 'Items' | 'LastEvaluatedKey' | 'Count'>>;
  batchWriteItem(input: BatchWriteItemCommandInput): Promise<Pick<BatchWriteItemCommandOutput, 'UnprocessedItems'>>;
}

export type { CreateTableCommandInput };
