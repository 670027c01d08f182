import { Duration, Token } from 'aws-cdk-lib';
import { describe, expect, it } from 'vitest';
import { appSettingsFromContext } from '../../infra/construct/app-context.js';
import { hookNames } from '../../infra/construct/lifecycle-events.js';
import { AllocatorPropsError, resolveAllocatorProps } from '../../infra/construct/props.js';
import { ValidationError } from '../../shared/errors.js';
import { buildAllocator, TEST_VPC_ID } from './support/stacks.js';

describe('Construct: VpcLeaseAllocator props', () => {
  it('sizes the lifecycle function’s concurrency to the Attach bucket’s rate unless told', () => {
    expect(resolveAllocatorProps({ vpc: TEST_VPC_ID }).maxConcurrency).toBe(20);
    const doubled = { AttachNetworkInterface: { bucket: 100, refillPerSecond: 10 } };
    expect(resolveAllocatorProps({ vpc: TEST_VPC_ID, ec2Buckets: doubled }).maxConcurrency).toBe(40);
    // A raise of other buckets only, or a slower Attach, keeps the floor; an explicit cap always wins.
    const create = { CreateNetworkInterface: { bucket: 200, refillPerSecond: 10 } };
    expect(resolveAllocatorProps({ vpc: TEST_VPC_ID, ec2Buckets: create }).maxConcurrency).toBe(20);
    expect(resolveAllocatorProps({ vpc: TEST_VPC_ID, ec2Buckets: doubled, maxConcurrency: 7 }).maxConcurrency).toBe(7);
    const huge = { AttachNetworkInterface: { bucket: 5000, refillPerSecond: 900 } };
    expect(resolveAllocatorProps({ vpc: TEST_VPC_ID, ec2Buckets: huge }).maxConcurrency).toBe(1000);
  });

  it.each([
    ['a malformed VPC id', { vpc: 'vpc-nope' }, /vpc: "vpc-nope" is not a VPC id/],
    [
      'a low watermark above the high one',
      { warmLowLeases: 20, warmHighLeases: 10 },
      /warmLowLeases: 20 is above warmHighLeases 10/,
    ],
    ['minLeases above maxPods', { minLeases: 200, maxPods: 100 }, /minLeases: 200 is above maxPods 100/],
    [
      'pod subnets by ids and tags at once',
      { podSubnets: ['subnet-0aaaaaaaaaaaaaaaa'], podSubnetTags: { tier: 'pods' } },
      /by ids or by tags, not both/,
    ],
    ['a malformed subnet id', { podSubnets: ['subnet-xyz'] }, /podSubnetIds: "subnet-xyz" is not a subnet id/],
    [
      'a security group name instead of an id',
      { securityGroups: ['default'] },
      /securityGroupIds: "default" is not a security group id/,
    ],
    ['a cluster name with spaces', { clusterName: 'bad name!' }, /clusterName: "bad name!" is not a cluster name/],
    [
      'a heartbeat timeout under 30 s',
      { heartbeatTimeout: Duration.seconds(10) },
      /heartbeatTimeoutS: must be between 30 and 7200, got 10/,
    ],
    [
      'a heartbeat timeout in fractions of a second',
      { heartbeatTimeout: Duration.millis(30_500) },
      /heartbeatTimeout: must be whole seconds/,
    ],
    [
      'a concurrency cap below 2',
      { maxConcurrency: 1 },
      /maxConcurrency: must be an integer between 2 and 1000, got 1/,
    ],
    ['a concurrency cap above 1000', { maxConcurrency: 1001 }, /maxConcurrency: must be an integer between 2 and 1000/],
    ['the same group twice', { autoScalingGroups: ['a', 'a'] }, /autoScalingGroups: "a" is given twice/],
    ['a pool interval under a minute', { poolInterval: Duration.seconds(30) }, /poolInterval: must be whole minutes/],
    ['a node image without a tag or digest', { nodeImageUri: 'vpc-lease-cni' }, /nodeImageUri: not an image reference/],
    [
      'an EC2 bucket without a refill rate',
      { ec2Buckets: { AttachNetworkInterface: { bucket: 100, refillPerSecond: 0 } } },
      /ec2Buckets: AttachNetworkInterface\.refillPerSecond must be a number/,
    ],
  ])('rejects %s with a message naming the field', (_label, props, message) => {
    expect(() => buildAllocator(props)).toThrow(message);
  });

  it('reports every problem at once, as a ValidationError carrying the list', () => {
    let caught: unknown;
    try {
      resolveAllocatorProps({ vpc: TEST_VPC_ID, maxConcurrency: 0, warmLowLeases: 9, warmHighLeases: 3, maxPods: 0 });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(AllocatorPropsError);
    expect(caught).toBeInstanceOf(ValidationError);
    const problems = (caught as AllocatorPropsError).problems;
    expect(problems.some((p) => p.startsWith('maxConcurrency'))).toBe(true);
    expect(problems.some((p) => p.startsWith('maxPods'))).toBe(true);
    expect((caught as Error).message).toMatch(/^VpcLeaseAllocator: invalid props: /);
  });

  it('accepts ids only known at deploy time (tokens) and keeps them for the environment', () => {
    const subnetId = Token.asString({ Ref: 'PodSubnet' });
    const resolved = resolveAllocatorProps({ vpc: Token.asString({ Ref: 'Vpc' }), podSubnets: [subnetId] });
    expect(resolved.podSubnetIds).toEqual([subnetId]);
    // The shared parser validated a stand-in; the real id is what the Lambdas get.
    expect(resolved.config.podSubnetIds).toEqual(['subnet-00000000']);
  });

  it('names lifecycle hooks with only the characters Auto Scaling accepts', () => {
    const names = hookNames('team.prod_1');
    expect(names.launch).toMatch(/^[A-Za-z0-9_/-]+$/);
    expect(names.terminate).toMatch(/^[A-Za-z0-9_/-]+$/);
    expect(names.launch).not.toBe(names.terminate);
  });
});

describe('App: settings from context', () => {
  const fromMap =
    (m: Record<string, unknown>) =>
    (key: string): unknown =>
      m[key];

  it('reads strings from -c and JSON values from cdk.json alike', () => {
    const fromCli = appSettingsFromContext(
      fromMap({
        clusterName: 'prod',
        vpcId: TEST_VPC_ID,
        autoScalingGroups: 'a, b',
        podSubnetTags: 'tier=pods,kubernetes.io/role=cni',
        prefixDelegation: 'true',
        minLeases: '12',
        reuseWaitS: '45',
        removalPolicy: 'destroy',
        example: 'true',
        ec2Buckets: '{"AttachNetworkInterface":{"bucket":100,"refillPerSecond":10}}',
      }),
    );
    const fromJson = appSettingsFromContext(
      fromMap({
        clusterName: 'prod',
        vpcId: TEST_VPC_ID,
        autoScalingGroups: ['a', 'b'],
        podSubnetTags: { tier: 'pods', 'kubernetes.io/role': 'cni' },
        prefixDelegation: true,
        minLeases: 12,
        reuseWaitS: 45,
        removalPolicy: 'destroy',
        example: true,
        ec2Buckets: { AttachNetworkInterface: { bucket: 100, refillPerSecond: 10 } },
      }),
    );
    for (const s of [fromCli, fromJson]) {
      expect(s.example).toBe(true);
      expect(s.allocator).toMatchObject({
        clusterName: 'prod',
        vpc: TEST_VPC_ID,
        autoScalingGroups: ['a', 'b'],
        podSubnetTags: { tier: 'pods', 'kubernetes.io/role': 'cni' },
        prefixDelegation: true,
        minLeases: 12,
        ec2Buckets: { AttachNetworkInterface: { bucket: 100, refillPerSecond: 10 } },
      });
      expect(s.allocator.reuseWait?.toSeconds()).toBe(45);
      // The raised Attach reaches the construct, whose default concurrency follows it.
      expect(resolveAllocatorProps({ ...s.allocator, vpc: TEST_VPC_ID }).maxConcurrency).toBe(40);
    }
  });

  it('defaults to an unconfigured stack named VpcLease', () => {
    const s = appSettingsFromContext(fromMap({}));
    expect(s.stackName).toBe('VpcLease');
    expect(s.example).toBe(false);
    expect(s.allocator.vpc).toBeUndefined();
  });

  it('reports every malformed context value at once', () => {
    expect(() =>
      appSettingsFromContext(
        fromMap({ minLeases: 'eight', prefixDelegation: 'yes', ipvlanMode: 'l3', podSubnetTags: 'x' }),
      ),
    ).toThrow(ValidationError);
    let message = '';
    try {
      appSettingsFromContext(
        fromMap({ minLeases: 'eight', prefixDelegation: 'yes', ipvlanMode: 'l3', podSubnetTags: 'x', ec2Buckets: '{' }),
      );
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/minLeases: must be a whole number, got "eight"/);
    expect(message).toMatch(/prefixDelegation: must be true or false, got "yes"/);
    // The mode is the node's setting: a stack that was given one is told where it goes.
    expect(message).toMatch(/ipvlanMode: not a stack setting; set "mode" in the DaemonSet ConfigMap's config.json/);
    expect(message).toMatch(/podSubnetTags: "x" is not Key=Value/);
    expect(message).toMatch(/ec2Buckets: must be JSON, got "\{"/);
  });
});
