/**
 * The scale-out time no control plane can beat under EC2's request token buckets. Each pod ENI needs, in
 * order, CreateNetworkInterface → AttachNetworkInterface → (attachment completes, `attachMs`; the
 * DeleteOnTermination ModifyNetworkInterfaceAttribute may run meanwhile). With C calls of an action whose
 * bucket holds B tokens refilled at R/s, starting full, the last call cannot start before (C − B)/R; whatever
 * follows it in the chain adds at least its minimum latency. The bound is the largest such chain end.
 * DynamoDB writes, Describe calls and CompleteLifecycleAction are left out, so the bound stays a bound.
 */
export interface BucketFigure {
  readonly bucket: number;
  readonly refillPerSecond: number;
}

export interface LowerBoundInput {
  readonly podEnis: number;
  readonly buckets: { readonly create: BucketFigure; readonly attach: BucketFigure; readonly modify: BucketFigure };
  /** Minimum API latency per action (the model's figure less its jitter). */
  readonly minLatencyMs: { readonly create: number; readonly attach: number; readonly modify: number };
  readonly attachMs: number;
}

export interface LowerBound {
  readonly lowerBoundMs: number;
  /** Which action's bucket sets the bound. */
  readonly bindingAction: 'create' | 'attach' | 'modify';
  readonly drainMs: { readonly create: number; readonly attach: number; readonly modify: number };
}

function drainMs(calls: number, b: BucketFigure): number {
  return Math.max(0, ((calls - b.bucket) / b.refillPerSecond) * 1000);
}

export function tokenBucketLowerBound(input: LowerBoundInput): LowerBound {
  const { podEnis: calls, buckets, minLatencyMs: lat, attachMs } = input;
  const drain = {
    create: drainMs(calls, buckets.create),
    attach: drainMs(calls, buckets.attach),
    modify: drainMs(calls, buckets.modify),
  };
  const afterAttach = Math.max(attachMs, lat.modify);
  const ends = {
    create: drain.create + lat.create + lat.attach + afterAttach,
    attach: drain.attach + lat.attach + afterAttach,
    modify: drain.modify + lat.modify,
  };
  const binding = (Object.keys(ends) as (keyof typeof ends)[]).reduce((a, b) => (ends[b] > ends[a] ? b : a));
  return { lowerBoundMs: Math.round(ends[binding]), bindingAction: binding, drainMs: drain };
}
