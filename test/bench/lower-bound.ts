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

/**
 * Launch-template adoption: no mutating call, so the bound is set by the Describe calls each SQS batch of
 * launches needs (one after the other: DescribeInstances, then DescribeNetworkInterfaces, each serving the
 * whole batch; every Describe action has its own bucket) and by the lease table's write and read rates. The
 * last batch's first Describe cannot start before its bucket drains, and its later Describes follow at their
 * minimum latency; the table cannot absorb the writes faster than its rate (on-demand: the 4,000 write and
 * 12,000 read units per second a new table starts with).
 */
export interface AdoptionBoundInput {
  readonly nodes: number;
  /** Launches one call of each Describe serves (the SQS batch size): at best every batch is full. */
  readonly nodesPerDescribe: number;
  /** Describe actions each batch calls once, in the order it calls them. */
  readonly describeChain: readonly string[];
  readonly describeBucket: BucketFigure;
  readonly minDescribeLatencyMs: number;
  /** Capacity the run consumed (measured), and what the table serves per second. */
  readonly writeUnits: number;
  readonly readUnits: number;
  readonly writeUnitsPerSecond: number;
  readonly readUnitsPerSecond: number;
}

export interface AdoptionBound {
  readonly lowerBoundMs: number;
  /** The Describe action or `dynamodb-writes` / `dynamodb-reads` that sets the bound. */
  readonly boundSetBy: string;
  readonly endsMs: Readonly<Record<string, number>>;
}

export function adoptionLowerBound(input: AdoptionBoundInput): AdoptionBound {
  const ends: Record<string, number> = {};
  input.describeChain.forEach((action, i) => {
    const rest = input.describeChain.length - i;
    const calls = Math.ceil(input.nodes / input.nodesPerDescribe);
    ends[action] = Math.round(drainMs(calls, input.describeBucket) + rest * input.minDescribeLatencyMs);
  });
  ends['dynamodb-writes'] = Math.round((input.writeUnits / input.writeUnitsPerSecond) * 1000);
  ends['dynamodb-reads'] = Math.round((input.readUnits / input.readUnitsPerSecond) * 1000);
  const boundSetBy = Object.keys(ends).reduce((a, b) => ((ends[b] ?? 0) > (ends[a] ?? 0) ? b : a));
  return { lowerBoundMs: ends[boundSetBy] ?? 0, boundSetBy, endsMs: ends };
}
