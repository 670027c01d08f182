import { describe, expect, it } from 'vitest';
import {
  canonicalIpv6,
  formatIpv6,
  ipFamilyOf,
  ipv6CidrContains,
  ipv6SubnetGateway,
  ipv6Within,
  nthAddress,
  nthSubPrefix,
  parseIpv6,
  parseIpv6Cidr,
} from '../../shared/ipv6.js';

describe('ipv6', () => {
  it.each([
    ['2001:DB8:0:0:0:0:0:1', '2001:db8::1'],
    ['2001:0db8:0000:0000:0001:0000:0000:0001', '2001:db8::1:0:0:1'], // first of two equal runs
    ['2001:db8:0:0:1:0:0:0', '2001:db8:0:0:1::'], // the longer run wins
    ['2001:db8:0:1:1:1:1:1', '2001:db8:0:1:1:1:1:1'], // a single zero group is not compressed
    ['0:0:0:0:0:0:0:0', '::'],
    ['::1', '::1'],
    ['fe80::', 'fe80::'],
    ['::ffff:10.0.0.1', '::ffff:a00:1'],
    ['ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff'],
  ])('formats %s canonically as %s', (input, canonical) => {
    expect(canonicalIpv6(input)).toBe(canonical);
  });

  it('agrees with Node URL hostnames on a sweep of zero patterns', () => {
    // Every pattern of zero/non-zero groups: Node's WHATWG URL serialiser is an independent RFC 5952 formatter.
    for (let mask = 0; mask < 256; mask += 1) {
      const groups = Array.from({ length: 8 }, (_, i) => ((mask >> i) & 1 ? (i * 0x1111 + 0xa) & 0xffff : 0));
      const long = groups.map((g) => g.toString(16)).join(':');
      const node = new URL(`http://[${long}]/`).hostname.slice(1, -1);
      expect(canonicalIpv6(long)).toBe(node);
    }
  });

  it.each([
    '',
    ':',
    '1:2:3:4:5:6:7',
    '1:2:3:4:5:6:7:8:9',
    '1::2::3',
    '12345::',
    'g::1',
    '::1.2.3',
    '1:2:3:4:5:6:7::8:9',
    'fe80::1%eth0',
  ])('rejects %j', (bad) => {
    expect(() => parseIpv6(bad)).toThrow(/invalid IPv6 address/);
  });

  it('refuses values outside 128 bits', () => {
    expect(() => formatIpv6(1n << 128n)).toThrow(/out of range/);
    expect(() => formatIpv6(-1n)).toThrow(/out of range/);
  });

  it('tells the families apart and refuses neither', () => {
    expect(ipFamilyOf('10.0.0.1')).toBe('ipv4');
    expect(ipFamilyOf('2600:1f18:aa:1::5')).toBe('ipv6');
    expect(() => ipFamilyOf('10.0.0.256')).toThrow(/invalid IP address/);
  });

  it('parses CIDRs and refuses host bits', () => {
    expect(parseIpv6Cidr('2600:1f18:aa:1::/64')).toEqual({ network: parseIpv6('2600:1f18:aa:1::'), prefixLength: 64 });
    expect(() => parseIpv6Cidr('2600:1f18:aa:1::1/64')).toThrow(/host bits/);
    expect(() => parseIpv6Cidr('2600::/129')).toThrow(/invalid IPv6 CIDR/);
    expect(() => parseIpv6Cidr('2600::')).toThrow(/invalid IPv6 CIDR/);
  });

  it('tests containment at the edges of a /80', () => {
    const p = parseIpv6Cidr('2600:1f18:aa:1:8c3e::/80');
    expect(ipv6CidrContains(p, parseIpv6('2600:1f18:aa:1:8c3e::'))).toBe(true);
    expect(ipv6CidrContains(p, parseIpv6('2600:1f18:aa:1:8c3e:ffff:ffff:ffff'))).toBe(true);
    expect(ipv6CidrContains(p, parseIpv6('2600:1f18:aa:1:8c3f::'))).toBe(false);
    expect(ipv6CidrContains(p, parseIpv6('2600:1f18:aa:1:8c3d:ffff:ffff:ffff'))).toBe(false);
    expect(ipv6Within('2600:1f18:aa:1::/64', '2600:1f18:aa:1:8c3e::/80')).toBe(true);
    expect(ipv6Within('2600:1f18:aa:1::/64', '2600:1f18:aa:2::/80')).toBe(false);
    expect(ipv6Within('2600:1f18:aa:1:8c3e::/80', '2600:1f18:aa:1::/64')).toBe(false); // wider, not inside
    expect(ipv6Within('2600:1f18:aa:1:8c3e::/80', '2600:1f18:aa:1:8c3e::9')).toBe(true);
  });

  it('counts /80s inside a /64 and addresses inside a prefix', () => {
    expect(nthSubPrefix('2600:1f18:aa:1::/64', 80, 0)).toBe('2600:1f18:aa:1::/80');
    expect(nthSubPrefix('2600:1f18:aa:1::/64', 80, 0x8c3e)).toBe('2600:1f18:aa:1:8c3e::/80');
    expect(nthSubPrefix('2600:1f18:aa:1::/64', 80, 0xffff)).toBe('2600:1f18:aa:1:ffff::/80');
    expect(() => nthSubPrefix('2600:1f18:aa:1::/64', 80, 0x10000)).toThrow(/no \/80 number/);
    expect(() => nthSubPrefix('2600:1f18:aa:1::/64', 56, 0)).toThrow(/does not fit/);
    expect(nthSubPrefix('2600:1f18:aa::/56', 64, 1)).toBe('2600:1f18:aa:1::/64');
    expect(nthAddress('2600:1f18:aa:1:8c3e::/80', 0)).toBe('2600:1f18:aa:1:8c3e::');
    expect(nthAddress('2600:1f18:aa:1:8c3e::/80', 0x10005)).toBe('2600:1f18:aa:1:8c3e:0:1:5');
    expect(() => nthAddress('2600:1f18:aa:1:8c3e::/80', 1n << 48n)).toThrow(/no address number/);
    expect(ipv6SubnetGateway('2600:1f18:aa:1::/64')).toBe('2600:1f18:aa:1::1');
  });
});
