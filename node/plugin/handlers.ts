import type { CniHandler, CniHandlers, CniOutput, CniRequest } from '../cni/skel.js';
import { cmdAdd } from './add.js';
import { cmdCheck } from './check.js';
import { CallContext, type PluginDeps } from './context.js';
import { cmdDel } from './del.js';
import { cmdGc } from './gc.js';
import { cmdStatus } from './status.js';

function handler(deps: PluginDeps, run: (ctx: CallContext) => Promise<CniOutput>): CniHandler {
  return async (request: CniRequest) => {
    const ctx = new CallContext(request, deps);
    try {
      return await run(ctx);
    } finally {
      await ctx.close();
    }
  };
}

/** The plugin's command table, as skel dispatches it. */
export function pluginHandlers(deps: PluginDeps): CniHandlers {
  return {
    ADD: handler(deps, cmdAdd),
    DEL: handler(deps, cmdDel),
    CHECK: handler(deps, cmdCheck),
    GC: handler(deps, cmdGc),
    STATUS: handler(deps, cmdStatus),
  };
}
