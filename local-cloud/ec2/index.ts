import type { Ec2SimulatorHandle } from '../ports.js';
import { serve } from './server.js';
import { type Ec2Admin, Ec2Simulator, type Ec2SimulatorOptions } from './simulator.js';

export type { BucketSpec } from '../../shared/data/catalog.js';
export type { FaultSpec } from './faults.js';
export { DEFAULT_LATENCY_MS } from './latency.js';
export type { ActionCounts, Ec2Admin, Ec2Call, Ec2SimulatorOptions, Ec2Snapshot } from './simulator.js';
export { DEFAULT_DELAYS, Ec2Simulator } from './simulator.js';

export interface Ec2SimulatorServer extends Ec2SimulatorHandle {
  readonly api: Ec2Simulator;
  /** Faults, latency, buckets, time scale, attachment pause, call counts, seeding. */
  readonly admin: Ec2Admin;
}

/**
 * Starts the EC2 simulator on 127.0.0.1: point `AWS_ENDPOINT_URL_EC2` (or an EC2Client's `endpoint`) at
 * `endpoint`. Defaults are fast for tests: timeScale 0, no throttling, no latency.
 */
export async function startEc2Simulator(
  options: Ec2SimulatorOptions & { readonly port?: number } = {},
): Promise<Ec2SimulatorServer> {
  const sim = new Ec2Simulator(options);
  const server = await serve(sim, options.port ?? 0);
  return {
    endpoint: server.endpoint,
    api: sim,
    admin: sim,
    close: async () => {
      sim.close();
      await server.close();
    },
  };
}
