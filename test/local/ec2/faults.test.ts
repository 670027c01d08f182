import {
  AttachNetworkInterfaceCommand,
  CreateNetworkInterfaceCommand,
  DescribeNetworkInterfacesCommand,
  DescribeSubnetsCommand,
  DescribeVpcsCommand,
  type EC2Client,
} from '@aws-sdk/client-ec2';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type Ec2Harness, errorCode, startHarness } from './harness.js';

let h: Ec2Harness;

async function countEnis(client: EC2Client): Promise<number> {
  const out = await client.send(
    new DescribeNetworkInterfacesCommand({ Filters: [{ Name: 'subnet-id', Values: [h.subnetId] }] }),
  );
  return out.NetworkInterfaces?.length ?? 0;
}

describe('EC2 simulator: throttling, faults and the admin interface', () => {
  beforeEach(async () => {
    h = await startHarness();
  });
  afterEach(async () => {
    await h.close();
  });

  it('answers RequestLimitExceeded with HTTP 503 from an empty bucket; the SDK retries up to maxAttempts', async () => {
    h.sim.admin.setTimeScale(1);
    h.sim.admin.setThrottling(true);
    h.sim.admin.setBucket('DescribeVpcs', { bucket: 1, refillPerSecond: 0 });
    const client = h.client({ maxAttempts: 3 });
    await client.send(new DescribeVpcsCommand({}));
    let failure: { name?: string; $metadata?: { httpStatusCode?: number; attempts?: number } } | undefined;
    try {
      await client.send(new DescribeVpcsCommand({}));
    } catch (err) {
      failure = err as typeof failure;
    }
    expect(failure?.name).toBe('RequestLimitExceeded');
    expect(failure?.$metadata?.httpStatusCode).toBe(503);
    expect(failure?.$metadata?.attempts).toBe(3);
    expect(h.sim.admin.counts()['DescribeVpcs']).toEqual({ calls: 4, ok: 1, errors: 0, throttled: 3, faulted: 0 });
    // Other actions have their own buckets.
    await client.send(
      new DescribeNetworkInterfacesCommand({ Filters: [{ Name: 'vpc-id', Values: [h.vpcId] }], MaxResults: 5 }),
    );
  });

  it('lets the SDK succeed on retry once the bucket refills', async () => {
    h.sim.admin.setTimeScale(1);
    h.sim.admin.setThrottling(true);
    // One token every 20 ms; the SDK's throttling backoff is longer than that on average.
    h.sim.admin.setBucket('DescribeVpcs', { bucket: 1, refillPerSecond: 50 });
    const client = h.client({ maxAttempts: 8 });
    await client.send(new DescribeVpcsCommand({}));
    const out = await client.send(new DescribeVpcsCommand({}));
    const counts = h.sim.admin.counts()['DescribeVpcs'];
    expect(out.Vpcs?.map((v) => v.VpcId)).toEqual([h.vpcId]);
    expect(counts?.ok).toBe(2);
    // Every attempt of the second call but the last was throttled, and the server saw each one.
    expect(counts?.throttled).toBe((out.$metadata.attempts ?? 1) - 1);
    expect(counts?.calls).toBe(1 + (out.$metadata.attempts ?? 1));
  });

  it('fails the next N calls of an action with an injected code, then recovers', async () => {
    h.sim.admin.failNext({ action: 'CreateNetworkInterface', code: 'InternalError', count: 2 });
    const client = h.client({ maxAttempts: 3 });
    const out = await client.send(new CreateNetworkInterfaceCommand({ SubnetId: h.subnetId }));
    expect(out.$metadata.attempts).toBe(3);
    expect(h.sim.admin.counts()['CreateNetworkInterface']).toEqual({
      calls: 3,
      ok: 1,
      errors: 2,
      throttled: 0,
      faulted: 2,
    });
    expect(await countEnis(client)).toBe(1);
    // A client error is not retried by the SDK.
    h.sim.admin.failNext({ action: 'DescribeVpcs', code: 'UnauthorizedOperation' });
    expect(await errorCode(client.send(new DescribeVpcsCommand({})))).toBe('UnauthorizedOperation');
    expect(h.sim.admin.counts()['DescribeVpcs']?.calls).toBe(1);
  });

  it('a lost response (fault after the effect) retried with the same ClientToken creates one ENI', async () => {
    h.sim.admin.failNext({ action: 'CreateNetworkInterface', code: 'InternalError', phase: 'after' });
    const client = h.client({ maxAttempts: 2 });
    const out = await client.send(
      new CreateNetworkInterfaceCommand({ SubnetId: h.subnetId, SecondaryPrivateIpAddressCount: 2 }),
    );
    expect(out.$metadata.attempts).toBe(2);
    expect(await countEnis(client)).toBe(1);
    const listed = await client.send(
      new DescribeNetworkInterfacesCommand({ Filters: [{ Name: 'subnet-id', Values: [h.subnetId] }] }),
    );
    expect(listed.NetworkInterfaces?.[0]?.NetworkInterfaceId).toBe(out.NetworkInterface?.NetworkInterfaceId);
  });

  it('adds latency to an action', async () => {
    h.sim.admin.addLatency('DescribeVpcs', 60);
    const started = performance.now();
    await h.ec2.send(new DescribeVpcsCommand({}));
    // A lower bound only: the call cannot be faster than the added latency.
    expect(performance.now() - started).toBeGreaterThanOrEqual(59);
    h.sim.admin.addLatency('DescribeVpcs', 0);
  });

  it('is deterministic under a seed: ids, MACs, addresses and probabilistic faults repeat', async () => {
    const run = async (): Promise<unknown[]> => {
      const other = await startHarness({ seed: 42 });
      try {
        other.sim.admin.failNext({ action: 'CreateNetworkInterface', code: 'InternalError', probability: 0.5 });
        const outcomes: unknown[] = [other.vpcId, other.subnetId];
        for (let i = 0; i < 8; i++) {
          try {
            const out = await other.ec2.send(
              new CreateNetworkInterfaceCommand({ SubnetId: other.subnetId, SecondaryPrivateIpAddressCount: 1 }),
            );
            const eni = out.NetworkInterface;
            outcomes.push([
              eni?.NetworkInterfaceId,
              eni?.MacAddress,
              eni?.PrivateIpAddresses?.map((p) => p.PrivateIpAddress),
            ]);
          } catch (err) {
            outcomes.push((err as Error).name);
          }
        }
        return outcomes;
      } finally {
        await other.close();
      }
    };
    const first = await run();
    const second = await run();
    expect(second).toEqual(first);
    expect(first).toContain('InternalError');
    expect(first.some((o) => Array.isArray(o))).toBe(true);
  });

  it('serves the same admin operations over HTTP', async () => {
    const post = (path: string, body: unknown): Promise<Response> =>
      fetch(`${h.sim.endpoint}${path}`, { method: 'POST', body: JSON.stringify(body) });
    const vpc = (await (await post('/_admin/vpcs', { cidrBlock: '192.168.0.0/16' })).json()) as { vpcId: string };
    expect(vpc.vpcId).toMatch(/^vpc-/);
    const subnet = (await (
      await post('/_admin/subnets', { vpcId: vpc.vpcId, cidrBlock: '192.168.1.0/24' })
    ).json()) as {
      subnetId: string;
    };
    expect(subnet.subnetId).toMatch(/^subnet-/);
    expect((await post('/_admin/faults', { action: 'DescribeVpcs', code: 'Unavailable', count: 1 })).status).toBe(200);
    const code = await errorCode(h.ec2.send(new DescribeVpcsCommand({})));
    expect(code).toBe('Unavailable');
    const vpcs = await h.ec2.send(new DescribeVpcsCommand({ VpcIds: [vpc.vpcId] }));
    expect(vpcs.Vpcs?.[0]?.CidrBlock).toBe('192.168.0.0/16');
    const counts = (await (await fetch(`${h.sim.endpoint}/_admin/counts`)).json()) as Record<
      string,
      { faulted: number; ok: number }
    >;
    expect(counts['DescribeVpcs']).toMatchObject({ faulted: 1, ok: 1 });
    expect((await post('/_admin/nope', {})).status).toBe(404);
    expect((await post('/_admin/time-scale', { timeScale: 0.5 })).status).toBe(200);
    expect(h.sim.api.timeline.timeScale).toBe(0.5);
    expect((await post('/_admin/delays', { attachMs: 1234, scope: 'all' })).status).toBe(200);
    expect(h.sim.api.world.config.delays.attachMs).toBe(1234);
    expect(h.sim.api.world.config.consistencyScope).toBe('all');
    await post('/_admin/buckets', { enabled: true, key: 'DescribeSubnets', bucket: 1, refillPerSecond: 0 });
    await h.ec2.send(new DescribeSubnetsCommand({}));
    expect(await errorCode(h.ec2.send(new DescribeSubnetsCommand({})))).toBe('RequestLimitExceeded');
    expect(h.sim.admin.counts()['DescribeSubnets']).toMatchObject({ ok: 1, throttled: 1, errors: 0 });
    await post('/_admin/latency', { action: 'DescribeVpcs', extraRealMs: 40 });
    const started = performance.now();
    await h.ec2.send(new DescribeVpcsCommand({}));
    expect(performance.now() - started).toBeGreaterThanOrEqual(39);
    await post('/_admin/delays', { attachMs: 0 });
    await post('/_admin/attachments', { paused: true });
    const instanceId = h.sim.api.launchInstance({ instanceType: 'm5.large', subnetId: h.subnetId }).instanceId;
    const eni = await h.ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: h.subnetId }));
    const eniId = eni.NetworkInterface?.NetworkInterfaceId as string;
    await h.ec2.send(
      new AttachNetworkInterfaceCommand({ NetworkInterfaceId: eniId, InstanceId: instanceId, DeviceIndex: 1 }),
    );
    // The 0 ms attach timer has fired (timers run in deadline order) but its progress is held.
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(h.sim.api.instanceInterfaces(instanceId)[1]?.attachmentState).toBe('attaching');
    await post('/_admin/attachments', { paused: false });
    expect(h.sim.api.instanceInterfaces(instanceId)[1]?.attachmentState).toBe('attached');
    const state = (await (await fetch(`${h.sim.endpoint}/_admin/state`)).json()) as {
      networkInterfaces: { eniId: string; attachment?: { instanceId: string; deviceIndex: number } }[];
      subnets: { subnetId: string; availableIpAddressCount: number }[];
    };
    expect(state.networkInterfaces.find((e) => e.eniId === eniId)?.attachment).toMatchObject({
      instanceId,
      deviceIndex: 1,
    });
    expect(state.subnets.find((s) => s.subnetId === h.subnetId)?.availableIpAddressCount).toBe(251 - 2);
    expect((await post('/_admin/counts/reset', {})).status).toBe(200);
    expect(h.sim.admin.counts()).toEqual({});
  });
});
