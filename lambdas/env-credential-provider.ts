import { type CredentialsProvider, envCredentials } from '../shared/dynamo/credentials.js';

/**
 * Replaces `@aws-sdk/credential-provider-node` in the Lambda bundles (packaging/lambda-bundle.ts). The Lambda
 * runtime puts the function role's credentials in the environment, the first link of the SDK's default chain;
 * the other links (profiles, SSO, web identity, IMDS) can never answer there and are a tenth of each bundle.
 */
export const defaultProvider = (): CredentialsProvider => envCredentials;
