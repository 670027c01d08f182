import { afterEach, describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../shared/errors.js';
import { ControlPlaneCloud, waitFor } from '../bench/control-plane-cloud.js';
import { HooklessFleet } from './hookless-fleet.js';
import { type Observer, observerOf } from './observer.js';

/**
 * The harness's reads must not meet the DynamoDB faults a schedule aims at the control plane: a throttled read
 * of its own once ended a hook-less schedule as a failure under load. Here every control-plane request is
 * throttled, so a harness read that went through the fault proxy fails at once, on any machine.
 */
describe('Chaos harness: its reads are past the schedule’s DynamoDB faults', () => {
  let c: ControlPlaneCloud | undefined;
  let observer: Observer | undefined;
  afterEach(async () => {
    observer?.close();
    await c?.close();
  });

  it('a hook-less fleet still reads its node phases while every control-plane request is throttled', async () => {
    c = await ControlPlaneCloud.start({ timeScale: 0.05 });
    observer = observerOf(c);
    const fleet = new HooklessFleet(c, observer.store);
    fleet.launch(1, 't3.medium');
    // A real launch first, faults off: the observer must see what the control plane wrote, not an empty table.
    expect(await waitFor(() => fleet.finished(), 120_000)).toBe(true);

    c.dynamo.faultRate = 1;
    // Positive control: the control plane's own store does meet the faults.
    await expect(c.deps.store.getNode(c.arnOf(fleet.launched[0]!))).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(await fleet.finished()).toBe(true);
    expect(await fleet.victim()).toBe('');
    expect(await fleet.violations()).toEqual([]);
    const nodes = await observer.store.listNodes();
    expect(nodes.map((n) => [n.instanceId, n.phase])).toEqual([[fleet.launched[0], 'READY']]);
    expect(c.dynamo.throttled.get('GetItem') ?? 0).toBeGreaterThan(0);
  }, 180_000);
});
