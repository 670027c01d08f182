import { VpcLeaseError } from '../../shared/errors.js';

/**
 * An EC2 API error as the simulator answers it: the real error code and HTTP status. Client errors are 400;
 * `RequestLimitExceeded` is 503 as EC2 sends it (the SDK retries it as throttling by its code), and server-side
 * codes (`InternalError`, `Unavailable`) are 500/503.
 */
export class Ec2ApiError extends VpcLeaseError {
  readonly statusCode: number;
  constructor(
    readonly code: string,
    message: string,
    statusCode?: number,
  ) {
    super(message);
    this.statusCode = statusCode ?? defaultStatus(code);
  }
}

const SERVER_CODES: Record<string, number> = {
  RequestLimitExceeded: 503,
  InternalError: 500,
  InternalFailure: 500,
  Unavailable: 503,
  ServiceUnavailable: 503,
  InsufficientInstanceCapacity: 500,
  DryRunOperation: 412,
};

export function defaultStatus(code: string): number {
  return SERVER_CODES[code] ?? 400;
}

export function notFound(
  kind: 'NetworkInterface' | 'Instance' | 'Subnet' | 'Vpc' | 'Group' | 'Attachment',
  id: string,
): Ec2ApiError {
  switch (kind) {
    case 'NetworkInterface':
      return new Ec2ApiError('InvalidNetworkInterfaceID.NotFound', `The networkInterface ID '${id}' does not exist`);
    case 'Instance':
      return new Ec2ApiError('InvalidInstanceID.NotFound', `The instance ID '${id}' does not exist`);
    case 'Subnet':
      return new Ec2ApiError('InvalidSubnetID.NotFound', `The subnet ID '${id}' does not exist`);
    case 'Vpc':
      return new Ec2ApiError('InvalidVpcID.NotFound', `The vpc ID '${id}' does not exist`);
    case 'Group':
      return new Ec2ApiError('InvalidGroup.NotFound', `The security group '${id}' does not exist`);
    case 'Attachment':
      return new Ec2ApiError('InvalidAttachmentID.NotFound', `The attachment ID '${id}' does not exist`);
  }
}
