import { seededRandom } from '../bench/stats.js';

/**
 * One chaos schedule: which faults hit one scale-out (and, for some, the scale-in after it). Everything is
 * drawn from the seed, so a failing seed replays: `npm run chaos -- --seed N --count 1`.
 */
export interface ChaosSchedule {
  readonly seed: number;
  readonly instances: number;
  readonly instanceType: string;
  readonly prefixDelegation: boolean;
  /** EC2 errors answered with this probability per call during a burst of `ec2BurstMs` (real ms) from the start. */
  readonly ec2Faults: readonly { action: string; code: string; probability: number; phase: 'before' | 'after' }[];
  readonly ec2BurstMs: number;
  /** Tiny token buckets on the mutating ENI calls: RequestLimitExceeded storms. */
  readonly throttleStorm: boolean;
  /** New ENIs and instances invisible to Describe (and refused by mutating calls) for this long, AWS ms. */
  readonly eventualConsistencyMs: number;
  /** Chance that a delivery's handler dies after its k-th EC2 call (first three deliveries only). */
  readonly crashProbability: number;
  /** SQS duplicates at this rate; plus captured events re-sent late, after everything settled. */
  readonly duplicateRate: number;
  readonly replayLateEvents: boolean;
  /** Share of DynamoDB requests throttled (ProvisionedThroughputExceeded) while the launch runs. */
  readonly dynamoThrottleRate: number;
  /** Instances terminated by EC2 (behind the group's back) while their launch is in progress. */
  readonly terminateMidProvisioning: number;
  /**
   * Forced lifecycle-hook timeouts: attachments are held for longer than a short heartbeat timeout (AWS s), so
   * the first launches time out, are abandoned and replaced; undefined: no forced timeout.
   */
  readonly shortHookTimeoutS: number | undefined;
  /** 64 concurrent kubelet ADD/DEL loops on a READY node, for this long (real ms). */
  readonly kubeletLoops: number;
  readonly kubeletMs: number;
  /** Scale the group to zero at the end: terminate hooks, DeleteOnTermination, partition removal. */
  readonly scaleInAtEnd: boolean;
  /**
   * No group and no hook: the instances come from RunInstances with the cluster tag (plus one without it that
   * must stay untouched), provisioned from EC2's pending/running events; scale-in is TerminateInstances.
   */
  readonly hookless: boolean;
  /**
   * Full subnets: once the first launch completes, another tenant fills the roomiest of two tagged pod subnets
   * (`exhaust`: every address; `fragment`, in prefix mode: no aligned /28 left). Expected outcome: no launch is
   * abandoned (the other subnet holds every minimum) and no invariant breaks. Undefined: not this family.
   */
  readonly fillSubnets: 'exhaust' | 'fragment' | undefined;
}

const TYPES = ['m5.large', 't3.medium', 'c5.xlarge'] as const;
const EC2_FAULTS = [
  { action: 'CreateNetworkInterface', code: 'InternalError' },
  { action: 'CreateNetworkInterface', code: 'Unavailable' },
  { action: 'AttachNetworkInterface', code: 'InternalError' },
  { action: 'ModifyNetworkInterfaceAttribute', code: 'InternalError' },
  { action: 'DescribeNetworkInterfaces', code: 'Unavailable' },
  { action: 'DescribeInstances', code: 'InternalError' },
  { action: 'AssignPrivateIpAddresses', code: 'InternalError' },
  { action: '*', code: 'RequestLimitExceeded' },
] as const;

export function scheduleFor(seed: number): ChaosSchedule {
  const r = seededRandom(seed * 7919 + 17);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(r() * items.length)]!;
  const chance = (p: number): boolean => r() < p;
  const instances = 2 + Math.floor(r() * 4);
  const hookTimeout = chance(0.1);
  // A forced timeout is its own schedule: stacked on other faults, the replacements would time out as well.
  const faultCount = !hookTimeout && chance(0.6) ? 1 + Math.floor(r() * 3) : 0;
  const instanceType = pick(TYPES);
  const prefixDelegation = chance(0.25);
  return {
    seed,
    instances,
    instanceType,
    prefixDelegation,
    ec2Faults: Array.from({ length: faultCount }, () => ({
      ...pick(EC2_FAULTS),
      probability: pick([0.1, 0.2, 0.35]),
      phase: chance(0.3) ? ('after' as const) : ('before' as const),
    })),
    ec2BurstMs: pick([1000, 3000, 6000]),
    throttleStorm: !hookTimeout && chance(0.2),
    eventualConsistencyMs: chance(0.3) ? pick([1000, 3000]) : 0,
    crashProbability: !hookTimeout && chance(0.5) ? pick([0.2, 0.4]) : 0,
    // SQS duplicates are rare; at 0.5 the simulator's copies of copies reach maxReceiveCount (0.5^9 per
    // message) and land in the DLQ although every delivery succeeded — a rate artefact, not a fault model.
    duplicateRate: chance(0.4) ? pick([0.1, 0.2]) : 0,
    replayLateEvents: chance(0.4),
    dynamoThrottleRate: chance(0.3) ? pick([0.05, 0.15]) : 0,
    terminateMidProvisioning: chance(0.25) ? 1 : 0,
    shortHookTimeoutS: hookTimeout ? 120 : undefined,
    kubeletLoops: 64,
    kubeletMs: 600,
    scaleInAtEnd: chance(0.4),
    // Every fifth seed, drawing nothing: every other seed's schedule is what it was before this kind existed.
    hookless: !hookTimeout && seed % 5 === 4,
    // Every tenth seed from 7, drawing nothing, like the hook-less kind above.
    fillSubnets: !hookTimeout && seed % 10 === 7 ? (prefixDelegation ? 'fragment' : 'exhaust') : undefined,
  };
}
