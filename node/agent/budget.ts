import { netconfSchema, type PluginConfig, parseNetconf } from '../config/netconf.js';

/**
 * Every wait on a CNI call through the agent, derived here from the netconf and nowhere else. The agent abandons a
 * call at `deadlineMs` (node/agent/server.ts); the shim waits `shimWaitMs` for the answer, which the agent sends it
 * with the acceptance, so the shim never gives up on a call the agent is still allowed to finish.
 */
export interface CallBudget {
  readonly deadlineMs: number;
  readonly shimWaitMs: number;
}

/** Netlink, the journal's fsyncs and the event loop's share with other calls: generous, as none of it waits on a peer. */
const LOCAL_STEPS_MS = 5_000;
/** What the shim allows past the deadline: the agent answers code 11 and releases the locks in milliseconds. */
export const SHIM_MARGIN_MS = 5_000;
/** kubelet gives the runtime 2 minutes for RunPodSandbox (--runtime-request-timeout), which must also create the sandbox. */
export const MAX_SHIM_WAIT_MS = 100_000;

type Timeouts = Pick<PluginConfig, 'attachmentLockWaitMs' | 'storeTimeoutMs' | 'imdsTimeoutMs'>;

/**
 * The lock wait, then an ADD's worst path: IMDS token and document (a credential refresh) and four store requests
 * (find, claim, a dual stack's second claim, a release on failure), each to its timeout.
 */
export function callBudget(config: Timeouts): CallBudget {
  const work = config.attachmentLockWaitMs + 2 * config.imdsTimeoutMs + 4 * config.storeTimeoutMs + LOCAL_STEPS_MS;
  const deadlineMs = Math.min(work, MAX_SHIM_WAIT_MS - SHIM_MARGIN_MS);
  return { deadlineMs, shimWaitMs: deadlineMs + SHIM_MARGIN_MS };
}

export const DEFAULT_BUDGET = callBudget({
  attachmentLockWaitMs: netconfSchema.attachmentLockWaitMs.default,
  storeTimeoutMs: netconfSchema.storeTimeoutMs.default,
  imdsTimeoutMs: netconfSchema.imdsTimeoutMs.default,
});

/** The budget of a request's netconf (its stdin); the defaults' when it does not parse (the call fails fast anyway). */
export function budgetOf(stdin: string): CallBudget {
  try {
    return callBudget(parseNetconf(JSON.parse(stdin) as Record<string, unknown>));
  } catch {
    return DEFAULT_BUDGET;
  }
}
