import type { LifecycleActionRef } from '../autoscaling/port.js';
import { isInstanceId } from '../domain/arn.js';
import { partitionOfRegion } from '../domain/partition.js';
import type { HeldTicket } from '../ec2/ec2-call-context.js';
import { ValidationError } from '../errors.js';
import { HOOKLESS_LAUNCH_STATES } from './hookless.js';

/**
 * The SQS record body is the EventBridge event as AWS emits it. When the lifecycle Lambda re-enqueues work,
 * it sends the same event back with a `vpcLease` progress marker added at the top level (EventBridge never
 * uses that key), so a re-enqueued body is still a valid event for any reader.
 */
export const LAUNCH_DETAIL_TYPE = 'EC2 Instance-launch Lifecycle Action';
export const TERMINATE_DETAIL_TYPE = 'EC2 Instance-terminate Lifecycle Action';
export const STATE_CHANGE_DETAIL_TYPE = 'EC2 Instance State-change Notification';

export interface RetryMarker {
  /** How many times this event was re-enqueued so far. */
  readonly attempt: number;
  /** When the hook last got a heartbeat (or the event's time, before the first). */
  readonly heartbeatAtMs: number;
  /** Seconds of re-enqueue delay asked for so far: the retry budget (RetryPolicy.maxWaitS). */
  readonly waitedS?: number;
  /** Why it was re-enqueued last, for logs. */
  readonly reason?: string;
  /** EC2 rate-budget tokens reserved and not used yet, by action (rate-budget.ts HeldTicket). */
  readonly tickets?: Readonly<Record<string, readonly HeldTicket[]>>;
}

/** Most tickets one action may carry: a launch makes a few calls per ENI; anything more is not ours. */
const MAX_TICKETS_PER_ACTION = 64;

/**
 * One carried ticket: `[startMs, usableUntilMs]`, or a bare start time as markers carried them before the window
 * (usable for the budget's grace only). Anything else is not a ticket.
 */
function ticketOf(raw: unknown): HeldTicket | undefined {
  if (typeof raw === 'number') return Number.isFinite(raw) ? [raw, raw] : undefined;
  if (!Array.isArray(raw) || raw.length !== 2) return undefined;
  const [startMs, usableUntilMs] = raw as unknown[];
  if (typeof startMs !== 'number' || typeof usableUntilMs !== 'number') return undefined;
  if (!Number.isFinite(startMs) || !Number.isFinite(usableUntilMs) || usableUntilMs < startMs) return undefined;
  return [startMs, usableUntilMs];
}

/** The marker's tickets if well-formed; a malformed set is dropped (the launch then reserves again). */
function ticketsOf(raw: unknown): RetryMarker['tickets'] {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return undefined;
  const out: Record<string, HeldTicket[]> = {};
  for (const [key, v] of Object.entries(raw as Record<string, unknown>)) {
    if (!Array.isArray(v) || v.length > MAX_TICKETS_PER_ACTION) return undefined;
    const tickets = v.map(ticketOf);
    if (!tickets.every((t): t is HeldTicket => t !== undefined)) return undefined;
    out[key] = tickets;
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

interface EventBase {
  readonly instanceId: string;
  readonly region: string;
  readonly accountId: string;
  readonly partition: string;
  readonly timeMs: number;
  readonly retry: RetryMarker;
  /** The event without the marker, to re-enqueue. */
  readonly raw: Record<string, unknown>;
}

export interface LaunchEvent extends EventBase {
  readonly kind: 'launch';
  /** Absent for a launch without a hook: EC2's `pending`/`running` state change (hookless.ts). */
  readonly lifecycle?: LifecycleActionRef;
}

export interface TerminateEvent extends EventBase {
  readonly kind: 'terminate';
  readonly lifecycle: LifecycleActionRef;
}

export interface StateChangeEvent extends EventBase {
  readonly kind: 'state-change';
  readonly state: string;
}

/** An event this Lambda does not act on (another detail type, a test notification). */
export interface IgnoredEvent {
  readonly kind: 'ignored';
  readonly why: string;
}

export type LifecycleEvent = LaunchEvent | TerminateEvent | StateChangeEvent | IgnoredEvent;

function str(obj: Record<string, unknown>, key: string, what: string): string {
  const value = obj[key];
  if (typeof value !== 'string' || value === '') throw new ValidationError(`${what} has no ${key}`);
  return value;
}

/** The partition of the event's resource ARN, else of its Region: never assumed `aws`. */
function partitionOf(obj: Record<string, unknown>, region: string): string {
  const resources = obj['resources'];
  const first = Array.isArray(resources) && typeof resources[0] === 'string' ? resources[0] : '';
  const partition = /^arn:([a-z-]+):/.exec(first)?.[1] ?? partitionOfRegion(region)?.id;
  if (!partition) throw new ValidationError(`event has no resource ARN and region ${region} is in no known partition`);
  return partition;
}

/** @throws ValidationError for a body that is not JSON or lacks what its detail type needs. */
export function parseLifecycleEvent(body: string): LifecycleEvent {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    throw new ValidationError('event body is not JSON');
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
    throw new ValidationError('event body is not an object');
  const { vpcLease, ...raw } = parsed as Record<string, unknown>;
  const detailType = raw['detail-type'];
  const detail = raw['detail'];
  if (typeof detailType !== 'string' || detail === null || typeof detail !== 'object')
    return { kind: 'ignored', why: 'not an EventBridge event' };
  const d = detail as Record<string, unknown>;
  const timeText = typeof raw['time'] === 'string' ? raw['time'] : '';
  const timeMs = Number.isNaN(Date.parse(timeText)) ? 0 : Date.parse(timeText);
  const marker = (vpcLease ?? {}) as Partial<RetryMarker>;
  let retry: RetryMarker = {
    attempt: typeof marker.attempt === 'number' ? marker.attempt : 0,
    heartbeatAtMs: typeof marker.heartbeatAtMs === 'number' ? marker.heartbeatAtMs : timeMs,
    ...(typeof marker.waitedS === 'number' ? { waitedS: marker.waitedS } : {}),
    ...(typeof marker.reason === 'string' ? { reason: marker.reason } : {}),
  };
  const tickets = ticketsOf(marker.tickets);
  if (tickets) retry = { ...retry, tickets };
  const base = {
    region: str(raw, 'region', 'event'),
    accountId: str(raw, 'account', 'event'),
    partition: partitionOf(raw, str(raw, 'region', 'event')),
    timeMs,
    retry,
    raw,
  };
  if (detailType === LAUNCH_DETAIL_TYPE || detailType === TERMINATE_DETAIL_TYPE) {
    // Auto Scaling sends a test notification when a hook is created; it has no instance and needs nothing.
    if (d['Event'] === 'autoscaling:TEST_NOTIFICATION') return { kind: 'ignored', why: 'test notification' };
    const instanceId = str(d, 'EC2InstanceId', detailType);
    if (!isInstanceId(instanceId)) throw new ValidationError(`${detailType} has invalid EC2InstanceId ${instanceId}`);
    const lifecycle: LifecycleActionRef = {
      autoScalingGroupName: str(d, 'AutoScalingGroupName', detailType),
      hookName: str(d, 'LifecycleHookName', detailType),
      token: str(d, 'LifecycleActionToken', detailType),
      instanceId,
    };
    return { kind: detailType === LAUNCH_DETAIL_TYPE ? 'launch' : 'terminate', instanceId, lifecycle, ...base };
  }
  if (detailType === STATE_CHANGE_DETAIL_TYPE) {
    const instanceId = str(d, 'instance-id', detailType);
    if (!isInstanceId(instanceId)) throw new ValidationError(`${detailType} has invalid instance-id ${instanceId}`);
    const state = str(d, 'state', detailType);
    if (HOOKLESS_LAUNCH_STATES.includes(state)) return { kind: 'launch', instanceId, ...base };
    return { kind: 'state-change', instanceId, state, ...base };
  }
  return { kind: 'ignored', why: `detail-type ${detailType}` };
}

/** The body to re-enqueue: the original event plus the next progress marker. */
export function requeueBody(event: LaunchEvent | TerminateEvent | StateChangeEvent, marker: RetryMarker): string {
  return JSON.stringify({ ...event.raw, vpcLease: marker });
}
