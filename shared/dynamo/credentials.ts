import { ValidationError } from '../errors.js';
import type { AwsCredentials } from './sigv4.js';

/** Where the light client gets credentials; the CNI adds an IMDS role provider in front of this one. */
export type CredentialsProvider = () => Promise<AwsCredentials>;

/** The standard environment variables, read on every call (cheap; lets a test or a rotation change them). */
export const envCredentials: CredentialsProvider = async () => {
  const accessKeyId = process.env['AWS_ACCESS_KEY_ID'];
  const secretAccessKey = process.env['AWS_SECRET_ACCESS_KEY'];
  if (!accessKeyId || !secretAccessKey) {
    throw new ValidationError(
      'AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set (in a Lambda, the runtime sets them from the function role)',
    );
  }
  const sessionToken = process.env['AWS_SESSION_TOKEN'];
  return sessionToken ? { accessKeyId, secretAccessKey, sessionToken } : { accessKeyId, secretAccessKey };
};
