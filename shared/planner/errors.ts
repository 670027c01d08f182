import { VpcLeaseError } from '../errors.js';

/**
 * Why a launch cannot be planned. Every kind is unrecoverable for this instance: retrying the same plan
 * against the same limits and subnets gives the same answer, so the lifecycle action is abandoned with it.
 */
export type PlanFailureKind = 'limits' | 'subnets-exhausted' | 'config';

export class PlanError extends VpcLeaseError {
  constructor(
    readonly kind: PlanFailureKind,
    message: string,
  ) {
    super(message);
  }
}
