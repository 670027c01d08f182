import { describe, expect, it } from 'vitest';
import {
  controlPlaneConfigFromEnv,
  controlPlaneConfigToEnv,
  controlPlaneSchema,
  parseControlPlaneConfig,
} from '../../shared/config/control-plane.js';
import { defaults } from '../../shared/config/schema.js';
import { ValidationError } from '../../shared/errors.js';

function problemsOf(input: unknown): readonly string[] {
  try {
    parseControlPlaneConfig(input);
  } catch (err) {
    if (err instanceof ValidationError) return err.problems;
    throw err;
  }
  throw new Error('expected a ValidationError');
}

describe('Config: control plane', () => {
  it('gives every field a default', () => {
    const config = parseControlPlaneConfig({});
    for (const name of Object.keys(controlPlaneSchema)) expect(config).toHaveProperty(name);
    expect(config).toEqual(defaults(controlPlaneSchema));
    expect(config.reuseWaitMs).toBe(30_000);
  });

  it.each([
    ['clusterName', '', /clusterName: must be a non-empty string/],
    ['clusterName', 'has space', /clusterName: "has space" is not a cluster name/],
    ['tableName', 'x', /tableName: "x" is not a DynamoDB table name/],
    ['prefixDelegation', 'yes', /prefixDelegation: must be true or false/],
    ['prefixFallbackToAddresses', 'no', /prefixFallbackToAddresses: must be true or false/],
    ['ipFamily', 'ipv7', /ipFamily: must be one of ipv4, ipv6, dual/],
    ['podSubnetIds', ['subnet-1'], /podSubnetIds: "subnet-1" is not a subnet id/],
    ['podSubnetIds', 'subnet-0123abcd', /podSubnetIds: must be a list of strings/],
    ['podSubnetTags', { a: 1 }, /podSubnetTags: must be an object of string values/],
    ['securityGroupIds', ['sg-zz'], /securityGroupIds: "sg-zz" is not a security group id/],
    ['minLeases', -1, /minLeases: must be between 0 and 4096, got -1/],
    ['warmLowLeases', 1.5, /warmLowLeases: must be an integer, got 1.5/],
    ['warmHighLeases', 0, /warmHighLeases: must be between 1 and 4096/],
    ['maxPods', 5000, /maxPods: must be between 1 and 4096/],
    ['reuseWaitMs', '30s', /reuseWaitMs: must be an integer, got "30s"/],
    ['releaseDelayMs', -5, /releaseDelayMs: must be between 0 and 86400000/],
    ['heartbeatTimeoutS', 10, /heartbeatTimeoutS: must be between 30 and 7200/],
    ['eniMinAgeForGcMs', 'soon', /eniMinAgeForGcMs: must be an integer/],
    ['logLevel', 'trace', /logLevel: must be one of debug, info, warn, error/],
    ['clusterTagKey', 'aws:autoscaling:groupName', /clusterTagKey: "aws:autoscaling:groupName" is not an EC2 tag key/],
    ['clusterTagKey', 'x'.repeat(129), /clusterTagKey: "x+" is not an EC2 tag key/],
  ])('rejects a bad %s (%j) naming the field and why', (field, value, message) => {
    const problems = problemsOf({ [field]: value });
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(message);
  });

  it('covers every field of the schema in the table above', () => {
    // Guards the table: a new field must get a rejection case.
    expect(Object.keys(controlPlaneSchema).sort()).toEqual(
      [
        'clusterName',
        'tableName',
        'prefixDelegation',
        'ipFamily',
        'prefixFallbackToAddresses',
        'podSubnetIds',
        'podSubnetTags',
        'securityGroupIds',
        'minLeases',
        'warmLowLeases',
        'warmHighLeases',
        'maxPods',
        'reuseWaitMs',
        'releaseDelayMs',
        'heartbeatTimeoutS',
        'eniMinAgeForGcMs',
        'logLevel',
        'clusterTagKey',
      ].sort(),
    );
  });

  it('reports every problem at once', () => {
    const problems = problemsOf({ logLevel: 'x', maxPods: 0, surprise: true });
    expect(problems).toEqual([
      expect.stringMatching(/^maxPods:/),
      expect.stringMatching(/^logLevel:/),
      'surprise: unknown field',
    ]);
  });

  it('rejects combinations that contradict each other', () => {
    expect(problemsOf({ warmLowLeases: 20, warmHighLeases: 10 })).toEqual([
      'warmLowLeases: 20 is above warmHighLeases 10',
    ]);
    expect(problemsOf({ minLeases: 50, maxPods: 20 })).toEqual(['minLeases: 50 is above maxPods 20']);
    expect(problemsOf({ podSubnetIds: ['subnet-0123abcd'], podSubnetTags: { pods: 'yes' } })[0]).toMatch(/not both/);
  });

  it('round-trips through the Lambda environment', () => {
    const config = parseControlPlaneConfig({
      clusterName: 'prod',
      prefixDelegation: true,
      ipFamily: 'dual',
      podSubnetIds: ['subnet-0123abcd'],
      minLeases: 3,
    });
    const env = controlPlaneConfigToEnv(config);
    expect(env['VPC_LEASE_IP_FAMILY']).toBe('dual');
    expect(env['VPC_LEASE_POD_SUBNET_IDS']).toBe('["subnet-0123abcd"]');
    expect(env['VPC_LEASE_MIN_LEASES']).toBe('3');
    expect(controlPlaneConfigFromEnv(env)).toEqual(config);
  });

  it('names the variable when the environment holds bad JSON', () => {
    expect(() => controlPlaneConfigFromEnv({ VPC_LEASE_POD_SUBNET_IDS: '[subnet' })).toThrow(
      /podSubnetIds: VPC_LEASE_POD_SUBNET_IDS is not JSON/,
    );
  });
});
