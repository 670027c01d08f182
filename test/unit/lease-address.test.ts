import { describe, expect, it } from 'vitest';
import { addressOnEni } from '../../shared/domain/lease-address.js';

describe('addressOnEni (invariant 2 for both families)', () => {
  const eni = {
    secondaryIps: ['10.0.0.7'],
    prefixes: ['10.0.1.16/28'],
    ipv6Addresses: ['2600:1f18::abcd'],
    ipv6Prefixes: ['2600:1f18:0:0:8c3e::/80'],
  };

  it.each([
    ['10.0.0.7', true],
    ['10.0.1.31', true], // last of the /28
    ['10.0.1.32', false],
    ['10.0.0.8', false],
    ['2600:1f18::abcd', true],
    ['2600:1F18:0:0:0:0:0:ABCD', true], // another spelling of the same address
    ['2600:1f18::8c3e:0:0:5', true], // inside the /80
    ['2600:1f18::8c3e:ffff:ffff:ffff', true],
    ['2600:1f18::8c3f:0:0:0', false], // the next /80
    ['2600:1f18::abce', false],
    ['not-an-ip', false],
  ])('%s → %s', (ip, expected) => {
    expect(addressOnEni(eni, ip)).toBe(expected);
  });

  it('finds no IPv6 on an ENI that reports none', () => {
    expect(addressOnEni({ secondaryIps: [], prefixes: [] }, '2600:1f18::abcd')).toBe(false);
  });
});
