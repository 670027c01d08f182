import { describe, expect, it } from 'vitest';
import { parseNetconf } from '../../node/config/netconf.js';
import { hasRouting, podRouting, routingTeardown } from '../../node/plugin/routing.js';

const base = { cniVersion: '1.0.0', name: 'vpc-lease', type: 'vpc-lease-cni' };

function problemsOf(netconf: Record<string, unknown>): { code?: number; details?: string } | undefined {
  try {
    parseNetconf(netconf);
    return undefined;
  } catch (err) {
    return err as { code?: number; details?: string };
  }
}

describe('parseNetconf: L3/L3S and the host veth', () => {
  it('accepts l3 and l3s, and defaults to a host veth, no service CIDRs and tables from 1000', () => {
    for (const mode of ['l3', 'l3s']) expect(parseNetconf({ ...base, mode }).mode).toBe(mode);
    expect(parseNetconf(base)).toMatchObject({ hostVeth: true, serviceCidrs: [], routeTableBase: 1000 });
  });

  it('takes service CIDRs that are network addresses', () => {
    const c = parseNetconf({ ...base, serviceCidrs: ['10.96.0.0/12', '172.20.0.0/16'] });
    expect(c.serviceCidrs).toEqual(['10.96.0.0/12', '172.20.0.0/16']);
  });

  it('refuses malformed CIDRs, host bits, service CIDRs without the veth and a table base among reserved ids', () => {
    const caught = problemsOf({
      ...base,
      serviceCidrs: ['10.96.0.1/12', 'ten/8'],
      hostVeth: false,
      routeTableBase: 3,
    });
    expect(caught?.code).toBe(7);
    expect(caught?.details).toContain('"ten/8" is not an IPv4 or IPv6 CIDR');
    expect(caught?.details).toContain('10.96.0.1/12 has host bits set');
    expect(caught?.details).toContain('serviceCidrs: need hostVeth');
    expect(caught?.details).toContain('routeTableBase:');
    expect(problemsOf({ ...base, hostVeth: 'yes' })?.details).toContain('hostVeth:');
    // Refused, not silently ignored: nothing would masquerade.
    expect(problemsOf({ ...base, ipMasq: true })?.details).toContain('ipMasq: not supported');
    expect(problemsOf({ ...base, ipMasq: false })).toBeUndefined();
  });
});

describe('routing specs from the configuration', () => {
  const l2 = { mode: 'l2', hostVeth: false, serviceCidrs: [], routeTableBase: 1000 } as const;

  it('asks for nothing in L2 without a host veth', () => {
    expect(hasRouting(l2)).toBe(false);
    expect(podRouting(l2, 'c1', 1)).toBeUndefined();
    expect(routingTeardown(l2, { containerId: 'c1', ifName: 'eth0' }, { ip: '10.0.0.9' })).toBeUndefined();
  });

  it('asks for the table in L3 and the veth when enabled, with what DEL knows', () => {
    const l3 = { ...l2, mode: 'l3', hostVeth: true, serviceCidrs: ['10.96.0.0/12'] } as const;
    expect(podRouting(l3, 'c1', 2)).toEqual({
      deviceIndex: 2,
      tableBase: 1000,
      hostVeth: { containerId: 'c1', serviceCidrs: ['10.96.0.0/12'] },
    });
    expect(routingTeardown(l3, { containerId: 'c1', ifName: 'eth0' }, {})).toEqual({
      mode: 'l3',
      ifName: 'eth0',
      tableBase: 1000,
      hostVeth: { containerId: 'c1' },
    });
    expect(
      routingTeardown(l3, { containerId: 'c1', ifName: 'eth0' }, { ip: '10.0.0.9', deviceIndex: 2 }),
    ).toMatchObject({
      podIp: '10.0.0.9',
      deviceIndex: 2,
    });
  });
});
