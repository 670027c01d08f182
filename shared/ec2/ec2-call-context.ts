import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * The EC2 rate budget's view of one piece of work (rate-budget.ts): when it arrived, how long it may wait, and
 * the tickets (tokens reserved ahead) it holds across re-enqueues.
 */

/**
 * A reserved token: when it may be sent, and until when it may still be sent late. While the budget's queue
 * stays at least one token ahead of the clock, EC2's bucket is never full, so a token nobody took at its start
 * is still in it; the queue reached `usableUntilMs` + one interval right after this token was taken, and a
 * stored time only grows. Past that, only the part of EC2's burst the budget holds back covers the lateness.
 */
export type HeldTicket = readonly [startMs: number, usableUntilMs: number];

/** What an EC2 call waits for: which launch it serves (for arrival order) and until when it may wait. */
export interface Ec2CallContext {
  /** When the work arrived (the event's `time`): earlier arrivals get the next tokens first. */
  readonly arrivalMs: number;
  /** Past this, a call that would still have to wait is deferred instead (the invocation's own bound). */
  readonly deadlineMs?: number;
  /** Tokens the work reserved in an earlier invocation (carried in its re-enqueued event), by key. */
  readonly tickets?: Readonly<Record<string, readonly HeldTicket[]>>;
}

/** The context of one piece of work as the budget tracks it: tickets held, calls declared but not reserved yet. */
export interface CallState {
  readonly context: Ec2CallContext;
  readonly tickets: Map<string, HeldTicket[]>;
  declared?: Readonly<Record<string, number>>;
  reserving?: Promise<void>;
}

const callContext = new AsyncLocalStorage<CallState>();

/** The work the current EC2 call serves, if it runs inside withEc2CallContext. */
export function currentCallState(): CallState | undefined {
  return callContext.getStore();
}

/** Runs `work` with its EC2 calls ordered by `context.arrivalMs` and bounded by its deadline. */
export function withEc2CallContext<T>(context: Ec2CallContext, work: () => Promise<T>): Promise<T> {
  const tickets = new Map(Object.entries(context.tickets ?? {}).map(([k, v]) => [k, [...v].sort(byStart)]));
  return callContext.run({ context, tickets }, work);
}

/**
 * Declares the calls the current work still has to make, by bucket key (EC2 action). At the first of them the
 * budget reserves them all at once, at their turn in each bucket however far ahead, so a launch deferred now
 * keeps its place: it is re-enqueued for its own token's time with the tickets (heldEc2Tickets) instead of
 * asking again and queueing behind everything that arrived meanwhile. Keys the work holds tickets for already
 * are not reserved twice. Outside a context (or without a budget) a declaration does nothing.
 */
export function declareEc2Calls(needs: Readonly<Record<string, number>>): void {
  const state = callContext.getStore();
  if (!state) return;
  const wanted = Object.entries(needs).filter(([key, n]) => n > 0 && !state.tickets.get(key)?.length);
  state.declared = wanted.length > 0 ? Object.fromEntries(wanted) : undefined;
}

export const byStart = (a: HeldTicket, b: HeldTicket): number => a[0] - b[0];

/** The tickets the current work holds and has not used, to carry into its re-enqueued event. */
export function heldEc2Tickets(): Record<string, HeldTicket[]> | undefined {
  const state = callContext.getStore();
  const held = [...(state?.tickets ?? [])].filter(([, starts]) => starts.length > 0);
  return held.length > 0 ? Object.fromEntries(held.map(([k, v]) => [k, [...v]])) : undefined;
}
