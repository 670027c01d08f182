import { VpcLeaseError } from '../../shared/errors.js';

/** The CNI spec's well-known error codes (0-99) and ours (100+). */
export const CniCode = {
  incompatibleVersion: 1,
  unsupportedField: 2,
  containerUnknown: 3,
  invalidEnvironment: 4,
  ioFailure: 5,
  decodeFailure: 6,
  invalidConfig: 7,
  tryAgainLater: 11,
  pluginNotAvailable: 50,
  limitedConnectivity: 51,
  /** The datapath could not be built (netlink refused a step). */
  datapathFailure: 100,
  /** CHECK found the attachment not as ADD left it. */
  checkFailed: 101,
  internal: 999,
} as const;
export type CniCodeValue = (typeof CniCode)[keyof typeof CniCode];

/** An error the skel prints as `{cniVersion, code, msg, details}` on stdout before exiting 1. */
export class CniError extends VpcLeaseError {
  constructor(
    readonly code: number,
    message: string,
    readonly details?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
