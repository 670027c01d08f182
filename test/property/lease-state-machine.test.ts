import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, it } from 'vitest';
import { createSdkDynamoApi } from '../../shared/dynamo/sdk-client.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import type { LeaseStore } from '../../shared/lease-store/port.js';
import { useDynalite } from '../lease-store/dynalite-env.js';
import { MemoryLeaseStore } from '../support/memory-lease-store.js';
import { leaseCommands, seedModel } from './lease-model.js';

const arn = (): string =>
  `arn:aws:ec2:eu-west-1:123456789012:instance/i-${randomBytes(9).toString('hex').slice(0, 17)}`;

async function runModel(makeStore: () => Promise<LeaseStore>, numRuns: number, maxCommands: number): Promise<void> {
  await fc.assert(
    fc.asyncProperty(fc.commands(leaseCommands, { maxCommands }), async (commands) => {
      const real = { store: await makeStore(), arn: arn() };
      const model = await seedModel(real);
      await fc.asyncModelRun(() => ({ model, real }), commands);
    }),
    { numRuns, seed: Number(process.env['VPC_LEASE_PROPERTY_SEED'] ?? 20261130) },
  );
}

describe('Lease state machine: model-based', () => {
  it('MemoryLeaseStore follows the model under any sequence of claims, releases and the release handshake', async () => {
    await runModel(async () => new MemoryLeaseStore(), 200, 40);
  });

  describe('DynamoLeaseStore on dynalite', () => {
    const env = useDynalite();
    it('follows the same model under the same commands', async () => {
      const tableName = await env.freshTable();
      const store = new DynamoLeaseStore({ api: createSdkDynamoApi(), tableName });
      await runModel(async () => store, 25, 25);
    }, 120_000);
  });
});
