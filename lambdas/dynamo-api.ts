import { LightDynamoClient } from '../shared/dynamo/light-client.js';

/**
 * A hung request is cut inside the lifecycle function's 40 s timeout and retried; no answer from DynamoDB takes
 * this long otherwise. (The SDK client set no per-request timeout at all.)
 */
const REQUEST_TIMEOUT_MS = 20_000;

/**
 * The Lambdas' DynamoDB client: the node's SDK-free one (the same JSON protocol and SigV4, tested against the
 * SDK's own requests), so a cold start does not load the DynamoDB SDK client. Region, endpoint and the function
 * role's credentials come from the environment the Lambda runtime sets, as they did for the SDK.
 */
export function lambdaDynamoApi(): LightDynamoClient {
  return new LightDynamoClient({ timeoutMs: REQUEST_TIMEOUT_MS });
}
