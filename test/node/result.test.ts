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

describe("a previous plugin's 1.1.0 result passed on", () => {
  // Every field the 1.1.0 result schema has beyond 1.0.0 (SPEC.md, "ADD Success").
  const prev110 = {
    cniVersion: '1.1.0',
    interfaces: [
      {
        name: 'net0',
        mac: '02:00:00:00:00:09',
        mtu: 1500,
        sandbox: '/var/run/netns/p',
        socketPath: '/run/vhu.sock',
        pciID: '0000:00:1f.6',
      },
    ],
    ips: [{ address: 'fd00::5/64', gateway: 'fd00::1', interface: 0 }],
    routes: [{ dst: '192.168.0.0/16', gw: '10.0.0.1', mtu: 1400, advmss: 1360, priority: 10, table: 0, scope: 253 }],
    dns: { nameservers: ['10.0.0.2'], domain: 'cluster.local', search: ['svc.cluster.local'], options: ['ndots:5'] },
  };

  it('keeps every 1.1.0 field, zero values included, when the list speaks 1.1.0', () => {
    const out = formatResult(appendResult(parsePrevResult(prev110), ours), '1.1.0');
    expect(out['interfaces']).toEqual([
      prev110.interfaces[0],
      { name: 'eth0', mac: '02:00:00:00:00:01', mtu: 9001, sandbox: '/var/run/netns/p' },
    ]);
    expect((out['routes'] as unknown[])[0]).toEqual(prev110.routes[0]);
    expect(out['dns']).toEqual(prev110.dns);
    expect(out['ips']).toEqual([prev110.ips[0], { address: '10.0.0.5/24', gateway: '10.0.0.1', interface: 1 }]);
  });

  it('converts down: a 1.0.0 list gets no 1.1.0 field, a 0.4.0 one the ip version of each address', () => {
    const v100 = formatResult(parsePrevResult(prev110), '1.0.0');
    expect(v100['interfaces']).toEqual([{ name: 'net0', mac: '02:00:00:00:00:09', sandbox: '/var/run/netns/p' }]);
    expect(v100['routes']).toEqual([{ dst: '192.168.0.0/16', gw: '10.0.0.1' }]);
    const v040 = formatResult(appendResult(parsePrevResult(prev110), ours), '0.4.0');
    expect((v040['ips'] as { version: string }[]).map((ip) => ip.version)).toEqual(['6', '4']);
  });

  it('reads a 0.4.0 prevResult (ip version fields) and prints it as 1.1.0 without them', () => {
    const v040 = {
      cniVersion: '0.4.0',
      interfaces: [{ name: 'a' }],
      ips: [{ version: '4', address: '10.1.0.2/24', interface: 0 }],
    };
    expect(formatResult(parsePrevResult(v040), '1.1.0')['ips']).toEqual([{ address: '10.1.0.2/24', interface: 0 }]);
  });

  it.each([
    [
      'a negative route table',
      { routes: [{ dst: '0.0.0.0/0', table: -1 }] },
      /routes\[0\]\.table must be an unsigned integer/,
    ],
    ['a string mtu', { interfaces: [{ name: 'a', mtu: '1500' }] }, /interfaces\[0\]\.mtu/],
    ['a numeric socketPath', { interfaces: [{ name: 'a', socketPath: 7 }] }, /socketPath must be a string/],
    ['nameservers that are not strings', { dns: { nameservers: [1] } }, /dns\.nameservers/],
  ])('rejects %s with code 7', (_name, raw, why) => {
    expect(() => parsePrevResult(raw)).toThrow(
      expect.objectContaining({ code: 7, details: expect.stringMatching(why) }),
    );
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
