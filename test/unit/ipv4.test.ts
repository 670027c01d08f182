import { describe, expect, it } from 'vitest';
import { addressesOf, formatIpv4, parseCidr, parseIpv4, subnetGateway } from '../../shared/ipv4.js';

describe('ipv4', () => {
  it('round-trips addresses at the edges', () => {
    for (const a of ['0.0.0.0', '10.0.0.1', '255.255.255.255', '192.168.1.10'])
      expect(formatIpv4(parseIpv4(a))).toBe(a);
  });

  it.each(['10.0.0', '10.0.0.256', '01.2.3.4', 'a.b.c.d', '1.2.3.4.5', ''])('rejects %j', (bad) => {
    expect(() => parseIpv4(bad)).toThrow(/invalid IPv4 address/);
  });

  it('parses CIDRs and refuses host bits', () => {
    expect(parseCidr('10.0.16.0/20')).toEqual({ network: parseIpv4('10.0.16.0'), prefixLength: 20 });
    expect(() => parseCidr('10.0.16.1/20')).toThrow(/host bits/);
    expect(() => parseCidr('10.0.0.0/33')).toThrow(/invalid CIDR/);
  });

  it('finds the VPC router of a subnet and the addresses of a /28', () => {
    expect(subnetGateway('10.0.16.0/20')).toBe('10.0.16.1');
    const block = addressesOf('10.0.1.16/28');
    expect(block).toHaveLength(16);
    expect(block[0]).toBe('10.0.1.16');
    expect(block[15]).toBe('10.0.1.31');
  });
});
