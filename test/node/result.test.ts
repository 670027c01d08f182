import { describe, expect, it } from 'vitest';
import { appendResult, type CniResult, formatResult, parsePrevResult } from '../../node/cni/result.js';
import { SUPPORTED_VERSIONS } from '../../node/cni/version.js';

const ours: CniResult = {
  interfaces: [{ name: 'eth0', mac: '02:00:00:00:00:01', mtu: 9001, sandbox: '/var/run/netns/p' }],
  ips: [{ address: '10.0.0.5/24', gateway: '10.0.0.1', interface: 0 }],
  routes: [{ dst: '0.0.0.0/0', gw: '10.0.0.1' }],
  dns: {},
};

describe('formatResult', () => {
  it('carries ip version "4" before 1.0.0 and drops it from 1.0.0 on', () => {
    for (const v of SUPPORTED_VERSIONS) {
      const out = formatResult(ours, v) as { cniVersion: string; ips: Record<string, unknown>[] };
      expect(out.cniVersion).toBe(v);
      expect('version' in out.ips[0]!).toBe(v.startsWith('0.'));
    }
  });

  it('prints the interface mtu only from 1.1.0 on', () => {
    const mtuOf = (v: (typeof SUPPORTED_VERSIONS)[number]) =>
      (formatResult(ours, v) as { interfaces: Record<string, unknown>[] }).interfaces[0]!['mtu'];
    expect(mtuOf('1.1.0')).toBe(9001);
    expect(mtuOf('1.0.0')).toBeUndefined();
  });

  it('round-trips through parsePrevResult for every version', () => {
    for (const v of SUPPORTED_VERSIONS) {
      const back = parsePrevResult(formatResult(ours, v));
      expect(back.ips).toEqual(ours.ips);
      expect(back.routes).toEqual(ours.routes);
      expect(back.interfaces[0]?.name).toBe('eth0');
    }
  });
});

describe('parsePrevResult', () => {
  it('rejects an ip whose interface index points nowhere, with code 7', () => {
    expect(() => parsePrevResult({ interfaces: [], ips: [{ address: '10.0.0.5/24', interface: 2 }] })).toThrow(
      expect.objectContaining({ code: 7 }),
    );
  });
});

describe('appendResult', () => {
  it('re-points our ips at the interfaces appended after the previous ones', () => {
    const prev: CniResult = {
      interfaces: [{ name: 'a' }, { name: 'b' }],
      ips: [{ address: '192.168.0.2/24', interface: 1 }],
      routes: [],
      dns: { nameservers: ['1.1.1.1'] },
    };
    const merged = appendResult(prev, ours);
    expect(merged.interfaces.map((i) => i.name)).toEqual(['a', 'b', 'eth0']);
    expect(merged.ips[1]).toMatchObject({ address: '10.0.0.5/24', interface: 2 });
    expect(merged.ips[0]).toMatchObject({ interface: 1 });
    expect(merged.dns).toEqual({ nameservers: ['1.1.1.1'] });
  });
});
