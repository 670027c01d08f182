import type { SimScheduler } from '../events/scheduler.js';
import { SqsEngine } from './engine.js';
import { listen } from './http-listener.js';
import { sqsRequestHandler } from './server.js';

export interface SqsSimulatorOptions {
  readonly scheduler: SimScheduler;
  readonly region: string;
  readonly accountId: string;
  readonly duplicateRate?: number;
  readonly seed?: number;
  readonly port?: number;
}

export interface SqsSimulatorHandle {
  readonly endpoint: string;
  readonly engine: SqsEngine;
  close(): Promise<void>;
}

/** The queue engine served on the SQS JSON protocol at 127.0.0.1 (for AWS_ENDPOINT_URL_SQS). */
export async function startSqsSimulator(options: SqsSimulatorOptions): Promise<SqsSimulatorHandle> {
  const engine = new SqsEngine(options);
  const listener = await listen(sqsRequestHandler(engine), options.port);
  engine.setBaseUrl(listener.url);
  return {
    endpoint: listener.url,
    engine,
    close: async () => {
      engine.close();
      await listener.close();
    },
  };
}
