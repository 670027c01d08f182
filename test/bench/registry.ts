import { type Ec2Buckets, lifecycleConcurrencyFor } from '../../shared/ec2/account-buckets.js';
import { runChurnBench } from './churn.js';
import { runCniBench } from './cni.js';
import { runCostBench } from './cost.js';
import { runLambdasBench } from './lambdas.js';
import { runScaleBench } from './scale.js';
import { runSteadyState } from './steady-state.js';

export interface BenchFlags {
  readonly rounds: number | undefined;
  readonly seconds: number | undefined;
  readonly instances: number | undefined;
  readonly timeScale: number | undefined;
  readonly concurrency: number | undefined;
  readonly seed: number;
  /** scale: pod ENIs from the launch template, adopted by the Lambda (issue 17). */
  readonly adopt?: boolean;
  /** scale: only prefix delegation (true) or only secondary addresses (false); both when absent. */
  readonly prefixDelegation?: boolean | undefined;
  /** scale: the account's raised EC2 buckets, JSON by bucket key (as VPC_LEASE_EC2_BUCKETS takes them). */
  readonly ec2Buckets?: Ec2Buckets | undefined;
  /** churn: a dist/ directory of another build whose agent runs beside this build's (before/after). */
  readonly baseline?: string | undefined;
}

export type Benchmark = (flags: BenchFlags) => Promise<Record<string, unknown>>;

/** Every benchmark by the name `npm run bench -- NAME` takes, in the order `npm run bench` runs them. */
export const BENCHMARKS: Readonly<Record<string, Benchmark>> = {
  cni: (f) => runCniBench({ rounds: f.rounds ?? 50, countedPods: 10, seed: f.seed }),
  churn: (f) =>
    runChurnBench({
      loops: 32,
      seconds: f.seconds ?? 20,
      leases: 48,
      seed: f.seed,
      ...(f.baseline ? { baselineDir: f.baseline } : {}),
    }),
  scale: async (f) => {
    const base = {
      instances: f.instances ?? 200,
      instanceType: 'm5.large',
      timeScale: f.timeScale ?? 1,
      // The construct's default: the lifecycle function's concurrency follows the Attach bucket's rate.
      maxConcurrency: f.concurrency ?? lifecycleConcurrencyFor(f.ec2Buckets),
      seed: f.seed,
      adopt: f.adopt === true,
      // No node signs a request in this bench: the IAM endpoint would only add a hop on the shared core.
      dynamoWithoutIam: true,
      ...(f.ec2Buckets ? { ec2Buckets: f.ec2Buckets } : {}),
    };
    const secondary =
      f.prefixDelegation !== true ? await runScaleBench({ ...base, prefixDelegation: false }) : undefined;
    const prefixes =
      f.prefixDelegation !== false ? await runScaleBench({ ...base, prefixDelegation: true }) : undefined;
    return { secondaryAddresses: secondary, prefixDelegation: prefixes };
  },
  cost: async (f) => ({
    ...(await runCostBench({ nodes: 20, pods: 200, seed: f.seed })),
    // What an hour of schedules and stream costs per node, idle and with pod churn; idle at 30 and 110 leases a
    // node (reads must not follow leases), after (the daily census) and before (daily full passes).
    steadyStateIdle: await runSteadyState({
      nodes: f.instances ?? 5000,
      leasesPerNode: 30,
      claimedPerNode: 20,
      podStartsPerNodeHour: 0,
    }),
    steadyStateIdle110Leases: await runSteadyState({
      nodes: f.instances ?? 5000,
      leasesPerNode: 110,
      claimedPerNode: 100,
      podStartsPerNodeHour: 0,
    }),
    steadyStateIdleBefore: await runSteadyState({
      nodes: f.instances ?? 5000,
      leasesPerNode: 30,
      claimedPerNode: 20,
      podStartsPerNodeHour: 0,
      dailyFullPasses: true,
    }),
    steadyStateIdle110LeasesBefore: await runSteadyState({
      nodes: f.instances ?? 5000,
      leasesPerNode: 110,
      claimedPerNode: 100,
      podStartsPerNodeHour: 0,
      dailyFullPasses: true,
    }),
    steadyStateChurn: await runSteadyState({
      nodes: 1000,
      leasesPerNode: 30,
      claimedPerNode: 20,
      podStartsPerNodeHour: 6,
    }),
  }),
  lambdas: (f) => runLambdasBench({ rounds: f.rounds ?? 10 }),
};
