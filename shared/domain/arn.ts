import { ValidationError } from '../errors.js';
import { isPartition } from './partition.js';

const INSTANCE_ID = /^i-[0-9a-f]{8}([0-9a-f]{9})?$/;
const INSTANCE_ARN = /^arn:(aws(?:-[a-z-]+)?):ec2:([a-z0-9-]+):(\d{12}):instance\/(i-[0-9a-f]{8}(?:[0-9a-f]{9})?)$/;

export function isInstanceId(value: string): boolean {
  return INSTANCE_ID.test(value);
}

/**
 * The partition key of every item of a node: the form IAM's `ec2:SourceInstanceARN` takes. The partition has
 * no default: an `aws` ARN for an instance in `aws-cn` or `aws-us-gov` never matches its own key.
 */
export function instanceArn(region: string, accountId: string, instanceId: string, partition: string): string {
  if (!isInstanceId(instanceId)) throw new ValidationError(`invalid instance id ${JSON.stringify(instanceId)}`);
  if (!/^\d{12}$/.test(accountId)) throw new ValidationError(`invalid account id ${JSON.stringify(accountId)}`);
  if (!/^[a-z]+(-[a-z]+)+-\d+$/.test(region)) throw new ValidationError(`invalid region ${JSON.stringify(region)}`);
  if (!isPartition(partition)) throw new ValidationError(`invalid partition ${JSON.stringify(partition)}`);
  return `arn:${partition}:ec2:${region}:${accountId}:instance/${instanceId}`;
}

export interface ParsedInstanceArn {
  readonly partition: string;
  readonly region: string;
  readonly accountId: string;
  readonly instanceId: string;
}

export function parseInstanceArn(arn: string): ParsedInstanceArn {
  const m = INSTANCE_ARN.exec(arn);
  if (!m) throw new ValidationError(`invalid instance ARN ${JSON.stringify(arn)}`);
  return { partition: m[1]!, region: m[2]!, accountId: m[3]!, instanceId: m[4]! };
}
