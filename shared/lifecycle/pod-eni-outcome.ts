import type { EniRecord, EniStep, NodeRecord } from '../domain/node.js';
import type { LifecycleDeps } from './deps.js';

/**
 * The vocabulary of the pod-ENI steps (pod-eni-steps.ts): what they need, how they record progress on the
 * node item, and what they report back to the launch and the pool.
 */
/** Steps an ENI passes through before its leases exist. */
export const IN_PROGRESS_STEPS: ReadonlySet<EniStep> = new Set(['PLANNED', 'CREATED', 'ATTACHING', 'ATTACHED']);

const STEP_ORDER: readonly EniStep[] = ['PLANNED', 'CREATED', 'ATTACHING', 'ATTACHED', 'LEASED'];

export type PodEniDeps = Pick<LifecycleDeps, 'ec2' | 'store' | 'config' | 'clock' | 'logger' | 'metrics'>;

export interface StepFailure {
  readonly eni: EniRecord;
  readonly err: unknown;
}

/**
 * Records changed ENI records (by device index; `undefined` drops the record) on the node item and returns
 * the node as written, or undefined when the node item is gone or has left the phase the caller works in.
 */
export type EniWriter = (
  node: NodeRecord,
  changed: ReadonlyMap<number, EniRecord | undefined>,
) => Promise<NodeRecord | undefined>;

export interface PodEniStepOptions {
  /** The owner tag of created ENIs. Default the lifecycle's. */
  readonly owner?: string;
  /** At most this many leases are written by this call (the pool's room under maxPods). Default no cap. */
  readonly leaseRoom?: number;
  /** Refuse when subnet replans leave fewer possible leases than this (a launch's minimum pool). */
  readonly minLeases?: number;
  /** DescribeNetworkInterfaces looks for attachments still in progress before waiting. Default 1. */
  readonly attachPolls?: number;
  /**
   * Sleep before the first look too (default false). An attachment takes EC2 seconds, so a look right after
   * attaching only spends a DescribeNetworkInterfaces token.
   */
  readonly sleepBeforeFirstLook?: boolean;
  readonly sleep?: (ms: number) => Promise<void>;
  /** Default `strictWriter`: one conditional write on the version read. */
  readonly write?: EniWriter;
}

export interface PodEniProgress {
  readonly leased: readonly string[];
  /** ENIs given up because no candidate subnet had room (their records are gone from the node item). */
  readonly dropped: readonly EniRecord[];
}

/**
 * - done: no ENI is in progress any more (every one LEASED, or dropped);
 * - wait: an attachment is still in progress, or EC2 answered with something worth retrying (`failures`);
 * - refused: EC2 refused for good (limits, bad parameters) or the subnets cannot hold `minLeases`;
 * - gone: the node item disappeared or left its phase under us (a terminate won).
 */
export type PodEniOutcome = PodEniProgress &
  (
    | { readonly kind: 'done'; readonly node: NodeRecord }
    | {
        readonly kind: 'wait';
        readonly node: NodeRecord;
        readonly reason: string;
        readonly delay: 'attaching' | 'backoff';
        readonly failures: readonly StepFailure[];
      }
    | {
        readonly kind: 'refused';
        readonly node: NodeRecord;
        readonly reason: string;
        readonly failures: readonly StepFailure[];
      }
    | { readonly kind: 'gone' }
  );

/** The launch's writer: a concurrent write (a racing invocation, a terminate) throws VersionConflictError. */
export function strictWriter(deps: PodEniDeps): EniWriter {
  return (node, changed) =>
    deps.store.updateNode(
      { ...node, enis: applyChanges(node.enis, changed), updatedAtMs: deps.clock.nowMs() },
      node.version,
    );
}

export function applyChanges(
  enis: readonly EniRecord[],
  changed: ReadonlyMap<number, EniRecord | undefined>,
): EniRecord[] {
  return enis.flatMap((e) => (changed.has(e.deviceIndex) ? (changed.get(e.deviceIndex) ?? []) : [e]));
}

/** Whether `next` would move the stored record backwards (a slower concurrent pass recording an older step). */
export function isStale(stored: EniRecord, next: EniRecord): boolean {
  return stored.eniId === next.eniId && STEP_ORDER.indexOf(stored.step) >= STEP_ORDER.indexOf(next.step);
}
