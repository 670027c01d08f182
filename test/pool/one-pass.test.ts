import type { DynamoDBBatchResponse, DynamoDBStreamEvent } from 'aws-lambda';
import { afterEach, describe, expect, it } from 'vitest';
import type { LeaseStore } from '../../shared/lease-store/port.js';
import { createPoolManagerHandler } from '../../shared/pool/events.js';
import { sweepPools } from '../../shared/pool/sweep.js';
import { fillSubnet } from '../chaos/fill-subnets.js';
import { claimOne, invariantViolations, type PoolEnv, readyNode, startPoolEnv } from './support.js';

/**
 * The store with its getNode calls held in pairs until both passes have arrived: both have then read the node
 * low before either assigns — the race of a stream pass and the sweep, made certain instead of likely. With the
 * marker, only the first reads pair up (the pass refused the marker reads no more); without it (the negative
 * control) the re-reads pair up too, the worst interleaving two unguarded passes can have.
 */
function racingStore(store: LeaseStore, options: { marker: boolean }): LeaseStore {
  const rounds = options.marker ? 1 : 2;
  let calls = 0;
  const gates = Array.from({ length: rounds }, () => {
    let open: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    return { gate, open, arrived: 0 };
  });
  return new Proxy(store, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (prop === 'getNode')
        return async (arn: string) => {
          const node = await target.getNode(arn);
          const round = gates[Math.floor(calls++ / 2)];
          if (round) {
            round.arrived += 1;
            if (round.arrived === 2) round.open();
            await round.gate;
          }
          return node;
        };
      // The negative control: every pass gets the marker, as if there were none.
      if (prop === 'acquirePassMarker' && !options.marker) return async () => true;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

function claimRecord(arn: string, ip: string): DynamoDBStreamEvent {
  return {
    Records: [
      {
        eventName: 'MODIFY',
        dynamodb: {
          Keys: { pk: { S: arn }, sk: { S: `ip#${ip}` } },
          SequenceNumber: '1',
          OldImage: { pk: { S: arn }, sk: { S: `ip#${ip}` }, st: { S: 'FREE' } },
          NewImage: { pk: { S: arn }, sk: { S: `ip#${ip}` }, st: { S: 'CLAIMED' } },
        },
      },
    ],
  };
}

/**
 * `fullSubnet`: the node's ENI is in a /26 another tenant has filled, with a roomy subnet beside it, so the
 * pass's Assign is refused and the top-up goes on with a new ENI there.
 */
async function race(env: PoolEnv, marker: boolean, fullSubnet = false) {
  let subnetId = env.subnetId;
  if (fullSubnet) {
    subnetId = env.sim.admin.seedSubnet(env.vpcId, '10.0.32.0/26', 'us-east-1a').subnetId;
    const spare = env.sim.admin.seedSubnet(env.vpcId, '10.0.33.0/25', 'us-east-1a').subnetId;
    env.config = { ...env.config, podSubnetIds: [subnetId, spare] };
  }
  const node = await readyNode(env, {
    subnetId,
    // Full subnet: room on the ENI for the whole top-up, so the fast path's Assign goes to the full subnet.
    enis: [{ ipCount: fullSubnet ? 2 : 6 }],
    ...(fullSubnet ? { podSubnetIds: env.config.podSubnetIds } : {}),
  });
  if (fullSubnet) await fillSubnet(subnetId, 'exhaust', env.ec2.client);
  let last = '';
  for (let i = 0; i < (fullSubnet ? 1 : 5); i++) last = (await claimOne(env, node.instanceArn)).ip;
  env.sim.admin.resetCounts();
  const deps = env.deps({ store: racingStore(env.store, { marker }) });
  const [stream, sweep] = await Promise.all([
    createPoolManagerHandler(deps)(claimRecord(node.instanceArn, last)) as Promise<DynamoDBBatchResponse>,
    sweepPools(deps),
  ]);
  const counted = env.sim.admin.counts()['AssignPrivateIpAddresses'];
  const creates = env.sim.admin.counts()['CreateNetworkInterface']?.ok ?? 0;
  // Every Assign request the simulator received, answered or refused (a second Assign may hit the ENI's limit).
  return { node, stream, sweep, creates, assigns: (counted?.ok ?? 0) + (counted?.errors ?? 0) };
}

describe('Function: manageNodePool › one assignment pass per node (issue 25)', () => {
  let env: PoolEnv | undefined;
  afterEach(async () => {
    await env?.close();
    env = undefined;
  });

  it('lets a stream pass and the sweep on the same node at once make exactly one Assign', async () => {
    env = await startPoolEnv();
    const { node, stream, sweep, assigns } = await race(env, true);
    expect(assigns).toBe(1);
    // The pass refused the marker failed, to be retried (the stream's record) or left to the next cycle.
    expect(stream.batchItemFailures.length + sweep.failed.length).toBe(1);
    expect(await env.store.countClaimable(node.instanceArn, env.clock.nowMs())).toBeGreaterThanOrEqual(
      env.config.warmLowLeases,
    );
    // The marker was given back: the next pass on the node may assign.
    expect(await env.store.acquirePassMarker(node.instanceArn, 'next', env.clock.nowMs(), 1_000)).toBe(true);
    expect(await invariantViolations(env)).toBe('');
  });

  it('makes two Assigns without the marker (negative control)', async () => {
    env = await startPoolEnv();
    const { assigns } = await race(env, false);
    expect(assigns).toBe(2);
  });

  it('keeps to one Assign and one new ENI when the ENI’s subnet is full and both passes would top up', async () => {
    env = await startPoolEnv();
    const { node, stream, sweep, assigns, creates } = await race(env, true, true);
    expect(assigns).toBe(1);
    expect(creates).toBe(1);
    expect(stream.batchItemFailures.length + sweep.failed.length).toBe(1);
    expect((await env.store.getNode(node.instanceArn))!.subnetRefusals).toHaveLength(1);
    expect(await invariantViolations(env)).toBe('');
  });

  it('makes two Assigns on the full subnet without the marker (negative control)', async () => {
    env = await startPoolEnv();
    const { assigns } = await race(env, false, true);
    expect(assigns).toBe(2);
  });

  it('takes over a marker whose holder died once it expires, and not before', async () => {
    env = await startPoolEnv();
    const node = await readyNode(env);
    const t0 = env.clock.nowMs();
    expect(await env.store.acquirePassMarker(node.instanceArn, 'dead', t0, 90_000)).toBe(true);
    expect(await env.store.acquirePassMarker(node.instanceArn, 'other', t0 + 89_000, 90_000)).toBe(false);
    expect(await env.store.acquirePassMarker(node.instanceArn, 'other', t0 + 90_001, 90_000)).toBe(true);
    // The dead holder's late give-back does not free the new holder's marker.
    await env.store.releasePassMarker(node.instanceArn, 'dead');
    expect(await env.store.acquirePassMarker(node.instanceArn, 'third', t0 + 90_002, 90_000)).toBe(false);
  });
});
