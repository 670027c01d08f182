import { CniCode, CniError } from '../cni/errors.js';
import { IptablesError } from '../datapath/connmark.js';
import { MasterMissingError } from '../datapath/netlink-datapath.js';
import { NetnsMissingError, NotANetnsError } from '../datapath/netns.js';
import { RtnlError } from '../datapath/rtnl.js';
import { ImdsError } from '../identity/imds.js';
import { AttachmentBusyError } from '../journal/lock.js';

/**
 * Maps the plugin's own failures to CNI codes (the skel maps the shared ones: validation 7, store and contention
 * 11). The runtime retries 11; 3 tells it the container is gone and no DEL is needed.
 */
export function classify(err: unknown): unknown {
  if (err instanceof CniError) return err;
  if (err instanceof NetnsMissingError)
    return new CniError(CniCode.containerUnknown, err.message, undefined, { cause: err });
  if (err instanceof NotANetnsError)
    return new CniError(CniCode.invalidEnvironment, `invalid CNI_NETNS: ${err.message}`, undefined, { cause: err });
  if (err instanceof MasterMissingError || err instanceof ImdsError || err instanceof AttachmentBusyError)
    return new CniError(CniCode.tryAgainLater, err.message, err.name, { cause: err });
  if (err instanceof RtnlError)
    return new CniError(CniCode.datapathFailure, err.message, err.errnoName, { cause: err });
  if (err instanceof IptablesError)
    return new CniError(CniCode.datapathFailure, err.message, undefined, { cause: err });
  return err;
}
