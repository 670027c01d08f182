/**
 * A small hierarchy: every error has its `name` set and chains its `cause`, and messages read
 * "failed to <verb> <object> <id>: <cause>" where they wrap another error.
 */
export class VpcLeaseError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** Input that can never succeed as given: bad configuration, a malformed address, an unknown state. */
export class ValidationError extends VpcLeaseError {
  constructor(
    message: string,
    readonly problems: readonly string[] = [message],
  ) {
    super(message);
  }
}

/** No lease of the node is claimable now (all CLAIMED, cooling down, or being released). */
export class NoFreeLeaseError extends VpcLeaseError {
  constructor(readonly instanceArn: string) {
    super(`no claimable lease on ${instanceArn}`);
  }
}

/** A conditional write lost: the item was not in the state the caller expected. Carries what was there. */
export class LeaseConflictError extends VpcLeaseError {
  constructor(
    message: string,
    readonly current?: unknown,
  ) {
    super(message);
  }
}

export class LeaseNotFoundError extends VpcLeaseError {
  constructor(
    readonly instanceArn: string,
    readonly ip: string,
  ) {
    super(`no lease for ${ip} on ${instanceArn}`);
  }
}

export class NodeNotFoundError extends VpcLeaseError {
  constructor(readonly instanceArn: string) {
    super(`no node item for ${instanceArn}`);
  }
}

/** The node item changed since it was read; re-read and re-apply. */
export class VersionConflictError extends VpcLeaseError {
  constructor(
    readonly instanceArn: string,
    readonly expectedVersion: number,
  ) {
    super(`node ${instanceArn} is no longer at version ${expectedVersion}`);
  }
}

/** The store could not be reached or throttled us past our retries: worth trying again later. */
export class StoreUnavailableError extends VpcLeaseError {}

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
