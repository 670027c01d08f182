import { describe, expect, it } from 'vitest';
import { CniError } from '../../node/cni/errors.js';
import { parseNetconf } from '../../node/config/netconf.js';
import { checkOverrides, isLoopbackHost, storeEndpointProblem } from '../../node/config/overrides.js';

function codeOf(fn: () => void): number | undefined {
  try {
    fn();
    return undefined;
  } catch (err) {
    return err instanceof CniError ? err.code : -1;
  }
}

describe('storeEndpointProblem', () => {
  it.each([
    ['https://dynamodb.us-east-1.amazonaws.com', undefined],
    ['https://vpce-0a1b2c3d.dynamodb.us-east-1.vpce.amazonaws.com', undefined],
    ['http://127.0.0.1:8000', undefined],
    ['http://127.9.9.9:8000/', undefined],
    ['http://localhost:8000', undefined],
    ['http://[::1]:8000', undefined],
    ['http://10.0.0.5:8000', /cleartext/],
    ['http://dynamodb.us-east-1.amazonaws.com', /cleartext/],
    ['http://127.0.0.1.evil.example', /cleartext/],
    ['http://[::ffff:10.0.0.5]', /cleartext/],
    ['ftp://127.0.0.1', /unsupported scheme/],
  ])('%s', (url, expected) => {
    const problem = storeEndpointProblem(url);
    if (expected === undefined) expect(problem).toBeUndefined();
    else expect(problem).toMatch(expected);
  });

  it('reads only literal loopback addresses and localhost as loopback', () => {
    expect(isLoopbackHost('127.0.0.1')).toBe(true);
    expect(isLoopbackHost('[::1]')).toBe(true);
    expect(isLoopbackHost('127.example')).toBe(false);
    expect(isLoopbackHost('0.0.0.0')).toBe(false);
  });
});

describe('the netconf refuses a cleartext store endpoint', () => {
  const conf = (dynamoEndpoint: string) => () =>
    parseNetconf({ cniVersion: '1.1.0', name: 'n', type: 'vpc-lease-cni', dynamoEndpoint });
  it('with code 7 for http to another host, and accepts https and loopback http', () => {
    expect(codeOf(conf('http://10.1.2.3:8000'))).toBe(7);
    expect(() => conf('http://10.1.2.3:8000')()).toThrow(CniError);
    expect(codeOf(conf('https://dynamodb.eu-west-1.amazonaws.com'))).toBeUndefined();
    expect(codeOf(conf('http://127.0.0.1:4567'))).toBeUndefined();
  });
});

describe('checkOverrides', () => {
  const test = { VPC_LEASE_TEST_MODE: '1' };
  it.each<[string, NodeJS.ProcessEnv, { imdsEndpoint?: string }, number | undefined]>([
    ['a production environment', { PATH: '/usr/bin' }, {}, undefined],
    ['the native dir without test mode', { VPC_LEASE_NATIVE_DIR: '/tmp/evil' }, {}, 4],
    ['the native dir in test mode', { ...test, VPC_LEASE_NATIVE_DIR: '/tmp/x' }, {}, undefined],
    ['the link kind without test mode', { VPC_LEASE_TEST_LINK_KIND: 'macvlan' }, {}, 4],
    ['test mode set to anything but 1', { VPC_LEASE_TEST_MODE: 'true', VPC_LEASE_NATIVE_DIR: '/x' }, {}, 4],
    ['a netconf IMDS on loopback without test mode', {}, { imdsEndpoint: 'http://127.0.0.1:1338' }, 7],
    ['a netconf IMDS on loopback in test mode', test, { imdsEndpoint: 'http://127.0.0.1:1338' }, undefined],
    ['the instance’s own IMDS named in the netconf', {}, { imdsEndpoint: 'http://169.254.169.254' }, undefined],
    [
      'the IPv6 IMDS in the environment',
      { AWS_EC2_METADATA_SERVICE_ENDPOINT: 'http://[fd00:ec2::254]' },
      {},
      undefined,
    ],
    ['another IMDS in the environment', { AWS_EC2_METADATA_SERVICE_ENDPOINT: 'http://10.0.0.9' }, {}, 4],
    ['an http store endpoint in the environment', { AWS_ENDPOINT_URL_DYNAMODB: 'http://10.0.0.9:8000' }, {}, 4],
    ['an http catch-all endpoint, even in test mode', { ...test, AWS_ENDPOINT_URL: 'http://10.0.0.9' }, {}, 4],
    [
      'an https store endpoint in the environment',
      { AWS_ENDPOINT_URL_DYNAMODB: 'https://dynamodb-fips.us-east-1.amazonaws.com' },
      {},
      undefined,
    ],
  ])('%s', (_name, env, config, expected) => {
    expect(codeOf(() => checkOverrides(env, config))).toBe(expected);
  });
});
