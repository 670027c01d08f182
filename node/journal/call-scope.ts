import { AsyncLocalStorage } from 'node:async_hooks';
import { VpcLeaseError } from '../../shared/errors.js';

/**
 * One agent call's scope. The agent abandons a call that outlives its deadline (node/agent/server.ts): it answers
 * the shim with code 11, releases the call's attachment locks and sets `abandoned`. From then on every step with an
 * effect (a lock, a journal write, a store or netlink request) throws, undo steps included, so the call stops as a
 * killed plugin process would: the journal holds what it held at that moment (an intent before any claim, the
 * address before any link), and the next ADD or DEL of the attachment finishes or undoes it under the lock.
 * Plugin processes run with no scope, and nothing changes for them.
 */
export interface CallScope {
  abandoned: boolean;
  /** Releases of the attachment locks the call holds now. */
  readonly locks: Set<() => Promise<void>>;
}

export class CallAbandonedError extends VpcLeaseError {}

export const callScope = new AsyncLocalStorage<CallScope>();

/** @throws CallAbandonedError when the current call was abandoned at its deadline. */
export function assertNotAbandoned(what: string): void {
  if (callScope.getStore()?.abandoned)
    throw new CallAbandonedError(`${what} refused: the agent abandoned this call at its deadline`);
}

/** `target` with every method fenced by assertNotAbandoned (methods run on the target itself, not the proxy). */
export function fenced<T extends object>(target: T, what: string): T {
  return new Proxy(target, {
    get(obj, key) {
      const value: unknown = Reflect.get(obj, key, obj);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        assertNotAbandoned(`${what}.${String(key)}`);
        return (value as (...a: unknown[]) => unknown).apply(obj, args);
      };
    },
  });
}
