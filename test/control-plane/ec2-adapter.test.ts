import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classifyEc2Code, Ec2ApiError, toEc2ApiError } from '../../shared/ec2/errors.js';
import { Semaphore } from '../../shared/ec2/semaphore.js';
import { Harness } from './support/harness.js';

describe('Function: classifyEc2Code', () => {
  it.each([
    ['RequestLimitExceeded', undefined, 'throttling'],
    ['Throttling', undefined, 'throttling'],
    ['InternalError', 500, 'unavailable'],
    ['SomethingNew', 503, 'unavailable'],
    ['InvalidNetworkInterfaceID.NotFound', 400, 'not-found-yet'],
    ['IncorrectInstanceState', 400, 'not-found-yet'],
    ['InsufficientFreeAddressesInSubnet', 400, 'limit'],
    ['AttachmentLimitExceeded', 400, 'limit'],
    ['PrivateIpAddressLimitExceeded', 400, 'limit'],
    ['InvalidSubnetID.NotFound', 400, 'fatal'],
    ['InvalidParameterValue', 400, 'fatal'],
    ['IdempotentParameterMismatch', 400, 'fatal'],
    // Not the node's fault: retried, never abandoned.
    ['UnauthorizedOperation', 403, 'account'],
    ['NetworkInterfaceLimitExceeded', 400, 'account'],
    ['SomethingNew', 400, 'account'],
  ])('classifies %s (HTTP %s) as %s', (code, status, kind) => {
    expect(classifyEc2Code(code, status)).toBe(kind);
  });

  it('wraps SDK errors keeping code and cause, and treats an unanswered request as unavailable', () => {
    const sdk = Object.assign(new Error('no such ENI'), {
      name: 'InvalidNetworkInterfaceID.NotFound',
      $metadata: { httpStatusCode: 400 },
    });
    const wrapped = toEc2ApiError('AttachNetworkInterface', sdk);
    expect(wrapped).toBeInstanceOf(Ec2ApiError);
    expect(wrapped).toMatchObject({ action: 'AttachNetworkInterface', code: sdk.name, kind: 'not-found-yet' });
    expect(wrapped.cause).toBe(sdk);
    expect(wrapped.retryable).toBe(true);
    expect(wrapped.message).toMatch(/^failed to call EC2 AttachNetworkInterface: /);
    const refused = toEc2ApiError(
      'DescribeSubnets',
      Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
    );
    expect(refused.kind).toBe('unavailable');
  });
});

describe('Class: Semaphore', () => {
  it('never runs more than its limit at once and runs everything', async () => {
    const sem = new Semaphore(3);
    let active = 0;
    let peak = 0;
    const done = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        sem.run(async () => {
          active += 1;
          peak = Math.max(peak, active);
          await new Promise((r) => setTimeout(r, (i % 4) + 1));
          active -= 1;
          return i;
        }),
      ),
    );
    expect(done).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(peak).toBe(3);
    expect(sem.inUse).toBe(0);
  });

  it('releases its slot when a task throws', async () => {
    const sem = new Semaphore(1);
    await expect(sem.run(() => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    await expect(sem.run(async () => 'next')).resolves.toBe('next');
  });
});

describe('Class: SdkEc2 (through the real SDK client against the EC2 simulator)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await Harness.start();
  });
  afterAll(async () => {
    await h.close();
  });

  it('caps concurrent mutating calls at the configured limit, lets describes through, and counts by action', async () => {
    const { SdkEc2 } = await import('../../shared/ec2/sdk-ec2.js');
    const { Metrics } = await import('../../shared/metrics.js');
    const { silentLogger } = await import('../../shared/log.js');
    const metrics = new Metrics(silentLogger, 'test');
    const ec2 = new SdkEc2({ client: h.ec2.client, maxConcurrentMutations: 2, metrics });
    h.sim.admin.addLatency('CreateNetworkInterface', 30);
    let inFlight = 0;
    let peak = 0;
    const track = async <T>(p: () => Promise<T>): Promise<T> => {
      inFlight += 1;
      peak = Math.max(peak, inFlight);
      try {
        return await p();
      } finally {
        inFlight -= 1;
      }
    };
    // The middleware sees requests actually sent, i.e. after the adapter's cap.
    h.ec2.client.middlewareStack.add(
      (next, context) => async (args) =>
        context.commandName === 'CreateNetworkInterfaceCommand' ? track(() => next(args)) : next(args),
      { step: 'initialize', name: 'peakTracker' },
    );
    const creates = Array.from({ length: 6 }, (_, i) =>
      ec2.createNetworkInterface({
        subnetId: h.subnetId,
        securityGroupIds: [],
        ipCount: 1,
        prefixCount: 0,
        tags: { k: String(i) },
        clientToken: `cap-${i}`,
      }),
    );
    const describes = Array.from({ length: 4 }, () => ec2.describeSubnets({ subnetIds: [h.subnetId] }));
    const [made] = await Promise.all([Promise.all(creates), Promise.all(describes)]);
    h.ec2.client.middlewareStack.remove('peakTracker');
    h.sim.admin.addLatency('CreateNetworkInterface', 0);

    expect(new Set(made.map((e) => e.eniId)).size).toBe(6);
    expect(peak).toBe(2);
    expect(metrics.totalsBy('Ec2Calls', 'Action')).toEqual({ CreateNetworkInterface: 6, DescribeSubnets: 4 });
  });

  it('counts errors by kind and throws classified errors', async () => {
    h.sim.admin.failNext({ action: 'DeleteNetworkInterface', code: 'InvalidNetworkInterfaceID.NotFound' });
    await expect(h.ec2.deleteNetworkInterface('eni-0123456789abcdef0')).rejects.toMatchObject({
      kind: 'not-found-yet',
      action: 'DeleteNetworkInterface',
    });
    expect(h.metrics.total('Ec2Errors', { Action: 'DeleteNetworkInterface', Kind: 'not-found-yet' })).toBe(1);
  });

  it('adds the cluster to Ec2Errors when told it, so the throttling alarm can be scoped', async () => {
    const { SdkEc2 } = await import('../../shared/ec2/sdk-ec2.js');
    const { Metrics } = await import('../../shared/metrics.js');
    const { silentLogger } = await import('../../shared/log.js');
    const metrics = new Metrics(silentLogger, 'test');
    const ec2 = new SdkEc2({ client: h.ec2.client, metrics, clusterName: 'prod-1' });
    h.sim.admin.failNext({ action: 'DeleteNetworkInterface', code: 'UnauthorizedOperation' });

    await expect(ec2.deleteNetworkInterface('eni-0123456789abcdef0')).rejects.toMatchObject({ kind: 'account' });

    expect(metrics.total('Ec2Errors', { ClusterName: 'prod-1', Kind: 'account' })).toBe(1);
    expect(metrics.total('Ec2Errors', { ClusterName: 'other' })).toBe(0);
  });

  it("reads an ENI's IPv6 addresses and /80s in canonical form, and none on an IPv4-only ENI", async () => {
    const { AssignIpv6AddressesCommand } = await import('@aws-sdk/client-ec2');
    const make = (token: string) =>
      h.ec2.createNetworkInterface({
        subnetId: h.subnetId,
        securityGroupIds: [],
        ipCount: 0,
        prefixCount: 0,
        tags: { owner: 'test' },
        clientToken: token,
      });
    const [v6, v4] = [await make('v6-1'), await make('v6-2')];
    const out = await h.ec2.client.send(
      new AssignIpv6AddressesCommand({ NetworkInterfaceId: v6.eniId, Ipv6PrefixCount: 1 }),
    );
    const prefix = out.AssignedIpv6Prefixes?.[0] as string;
    const [seen] = await h.ec2.describeNetworkInterfaces({ eniIds: [v6.eniId] });
    expect(seen?.ipv6Prefixes).toEqual([prefix]);
    expect(seen?.ipv6Addresses).toBeUndefined();
    const [plain] = await h.ec2.describeNetworkInterfaces({ eniIds: [v4.eniId] });
    expect(plain).not.toHaveProperty('ipv6Prefixes');
  });

  it('tags, untags and reads instance states in bulk through the same counting and classification', async () => {
    h.metrics.resetTotals();
    const eni = await h.ec2.createNetworkInterface({
      subnetId: h.subnetId,
      securityGroupIds: [],
      ipCount: 0,
      prefixCount: 0,
      tags: { owner: 'test' },
      clientToken: 'tags-1',
    });
    await h.ec2.createTags([eni.eniId], { mark: 'one' });
    expect((await h.ec2.describeNetworkInterfaces({ tags: { mark: 'one' } })).map((e) => e.eniId)).toEqual([eni.eniId]);
    await h.ec2.deleteTags([eni.eniId], ['mark']);
    expect(await h.ec2.describeNetworkInterfaces({ tags: { mark: 'one' } })).toEqual([]);
    await h.ec2.createTags([], { ignored: 'x' }); // nothing to tag: no call

    const instance = h.sim.api.launchInstance({ instanceType: 'm5.large', subnetId: h.subnetId });
    const states = await h.ec2.describeInstanceStates([instance.instanceId, 'i-0000000000000dead']);
    // An unknown id is absent, not a NotFound failing the whole call.
    expect([...states.keys()]).toEqual([instance.instanceId]);
    expect(h.metrics.totalsBy('Ec2Calls', 'Action')).toMatchObject({ CreateTags: 1, DeleteTags: 1 });

    h.sim.admin.failNext({ action: 'CreateTags', code: 'UnauthorizedOperation' });
    await expect(h.ec2.createTags([eni.eniId], { mark: 'two' })).rejects.toMatchObject({
      kind: 'account',
      action: 'CreateTags',
    });
    expect(h.metrics.total('Ec2Errors', { Action: 'CreateTags', Kind: 'account' })).toBe(1);
  });

  it('reads instance limits once per type and keeps them for the container', async () => {
    h.metrics.resetTotals();
    const [a, b] = await Promise.all([
      h.ec2.describeInstanceLimits('c5.4xlarge'),
      h.ec2.describeInstanceLimits('c5.4xlarge'),
    ]);
    await h.ec2.describeInstanceLimits('c5.4xlarge');
    expect(a).toEqual(b);
    expect(a).toMatchObject({ instanceType: 'c5.4xlarge', maxEnis: 8, ipv4PerEni: 30, defaultNetworkCardIndex: 0 });
    expect(h.metrics.total('Ec2Calls', { Action: 'DescribeInstanceTypes' })).toBe(1);
  });

  it('retries throttling inside the SDK (adaptive mode) and succeeds', async () => {
    h.metrics.resetTotals();
    h.sim.admin.failNext({ action: 'DescribeSubnets', code: 'RequestLimitExceeded', count: 1 });
    const subnets = await h.ec2.describeSubnets({ subnetIds: [h.subnetId] });
    expect(subnets.map((s) => s.subnetId)).toEqual([h.subnetId]);
    expect(h.metrics.total('Ec2Retries', { Action: 'DescribeSubnets' })).toBe(1);
  });

  it('describes the ENIs attached to many instances with one filter, exactly as one call per instance would', async () => {
    const launch = () =>
      h.sim.api.launchInstance({
        instanceType: 'm5.large',
        subnetId: h.subnetId,
        networkInterfaces: [{ deviceIndex: 1, secondaryPrivateIpAddressCount: 2, deleteOnTermination: true }],
      }).instanceId;
    const [a, b, other] = [launch(), launch(), launch()];
    const ids = (enis: readonly { eniId: string }[]) => enis.map((e) => e.eniId).sort();
    const each = [
      ...(await h.ec2.describeNetworkInterfaces({ attachedTo: a })),
      ...(await h.ec2.describeNetworkInterfaces({ attachedTo: b })),
    ];
    h.metrics.resetTotals();

    const calls = () => h.metrics.total('Ec2Calls', { Action: 'DescribeNetworkInterfaces' });
    const together = await h.ec2.describeNetworkInterfaces({ attachedToAny: [a, b] });
    expect(calls()).toBe(1);
    // 250 ids (248 of no instance): two filters of at most 200 values, the same ENIs.
    const unknown = Array.from({ length: 248 }, (_, i) => `i-${(i + 1).toString(16).padStart(17, '0')}`);
    const split = await h.ec2.describeNetworkInterfaces({ attachedToAny: [a, ...unknown, b] });
    expect(calls()).toBe(1 + 2);
    const none = await h.ec2.describeNetworkInterfaces({ attachedToAny: [] });
    expect(calls()).toBe(1 + 2);

    expect(each).toHaveLength(4);
    expect(ids(together)).toEqual(ids(each));
    expect(ids(split)).toEqual(ids(each));
    expect(together.some((e) => e.attachment?.instanceId === other)).toBe(false);
    expect(none).toEqual([]);
  });
});
