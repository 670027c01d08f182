import { listen } from '../sqs/http-listener.js';
import { autoScalingRequestHandler } from './server.js';
import type { AutoScalingSimulatorOptions } from './simulator.js';
import { AutoScalingSimulator } from './simulator.js';

export interface AutoScalingSimulatorHandle {
  readonly endpoint: string;
  readonly simulator: AutoScalingSimulator;
  close(): Promise<void>;
}

/** The Auto Scaling simulator on its Query protocol at 127.0.0.1 (for AWS_ENDPOINT_URL_AUTO_SCALING). */
export async function startAutoScalingSimulator(
  options: AutoScalingSimulatorOptions & { readonly port?: number },
): Promise<AutoScalingSimulatorHandle> {
  const simulator = new AutoScalingSimulator(options);
  const listener = await listen(autoScalingRequestHandler(simulator), options.port);
  return {
    endpoint: listener.url,
    simulator,
    close: async () => {
      simulator.close();
      await listener.close();
    },
  };
}
