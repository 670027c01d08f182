import { errorMessage } from '../../shared/errors.js';
import { CniCode, CniError } from '../cni/errors.js';
import type { CniOutput } from '../cni/skel.js';
import type { CallContext } from './context.js';

/**
 * STATUS (CNI 1.1): ready when the node knows who it is, reaches its store and has a claimable lease — the
 * three things an ADD needs. Existing pods never depend on the store, so every failure is 50 (cannot ADD).
 */
export async function cmdStatus(ctx: CallContext): Promise<CniOutput> {
  let count: number;
  try {
    const identity = await ctx.identity();
    count = await (await ctx.store()).countClaimable(identity.instanceArn, ctx.nowMs());
  } catch (err) {
    ctx.log.warn('STATUS: not available', { err });
    throw new CniError(CniCode.pluginNotAvailable, 'the plugin cannot serve ADD', errorMessage(err), { cause: err });
  }
  if (count === 0) {
    ctx.log.warn('STATUS: no claimable lease');
    throw new CniError(CniCode.pluginNotAvailable, 'no claimable lease on this node', 'the pool is empty');
  }
  return undefined;
}
