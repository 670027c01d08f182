import { describe, expect, it } from 'vitest';
import { describeSchedule } from './describe.js';
import { runSchedule } from './run-schedule.js';
import { scheduleFor } from './schedule.js';

/**
 * The short seeded chaos run inside `npm test` (`npm run chaos` runs 200). Five schedules that cover most fault
 * kinds between them: a lost CreateNetworkInterface response and a handler crash in prefix mode (1); a pod
 * subnet fragmented mid-run in prefix mode (no aligned /28 left, so EC2 answers InsufficientCidrBlocks) under a
 * crash, SQS duplicates, late events, DynamoDB throttling, a termination mid-provisioning and a scale-in (177);
 * DescribeInstances errors, duplicates, DynamoDB throttling and a scale-in (151); eventual consistency with
 * duplicated and late events (152); hook-less nodes from RunInstances under lost Attach responses, a crash,
 * duplicates and a termination mid-provisioning (64). Every schedule ends with 64 kubelets churning on a READY
 * node and one reconcile. (`describeSchedule` prints any seed's mix.)
 */
const SEEDS = [1, 177, 151, 152, 64];

describe('Chaos: seeded schedules through the whole control plane', () => {
  it.each(SEEDS)(
    'schedule %i keeps every invariant',
    async (seed) => {
      const schedule = scheduleFor(seed);
      const result = await runSchedule(schedule);
      expect(result.violations, `seed ${seed}: ${describeSchedule(schedule)}; trail ${result.trailFile}`).toEqual([]);
      // The schedule really ran: its instances launched and the kubelets got addresses.
      expect(result.stats.instancesLaunched).toBeGreaterThanOrEqual(schedule.instances);
      expect(result.stats.kubeletPods).toBeGreaterThan(0);
    },
    120_000,
  );
});
