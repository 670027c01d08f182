import { describe, expect, it } from 'vitest';
import { parseNetconf } from '../../node/config/netconf.js';

const base = { cniVersion: '1.0.0', name: 'vpc-lease', type: 'vpc-lease-cni' };

describe('parseNetconf', () => {
  it('applies every default to the shortest configuration', () => {
    const c = parseNetconf(base);
    expect(c).toMatchObject({ mode: 'l2', mtu: 0, tableName: 'vpc-lease', dataDir: '/var/lib/cni/vpc-lease' });
    expect(c.name).toBe('vpc-lease');
  });

  it('accepts the fields runtimes add (prevResult, runtimeConfig, cni.dev/*, args)', () => {
    expect(() =>
      parseNetconf({
        ...base,
        prevResult: {},
        runtimeConfig: {},
        args: { x: 1 },
        capabilities: {},
        'cni.dev/valid-attachments': [],
      }),
    ).not.toThrow();
  });

  it('refuses unknown fields with code 2, naming them', () => {
    expect(() => parseNetconf({ ...base, mtU: 1500, bogus: true })).toThrow(
      expect.objectContaining({ code: 2, message: expect.stringContaining('mtU, bogus') }),
    );
  });

  it('reports every bad value at once with code 7', () => {
    let caught: { code?: number; details?: string } | undefined;
    try {
      parseNetconf({
        ...base,
        name: '-bad',
        mode: 'l4',
        mtu: 20,
        tableName: 'x',
        dynamoEndpoint: 'ftp://a',
        logFile: 'rel',
      });
    } catch (err) {
      caught = err as typeof caught;
    }
    expect(caught?.code).toBe(7);
    for (const field of ['name', 'mode', 'mtu', 'tableName', 'dynamoEndpoint', 'logFile'])
      expect(caught?.details).toContain(`${field}:`);
  });

  it('accepts the three ipvlan modes and refuses any other', () => {
    for (const mode of ['l2', 'l3', 'l3s']) expect(parseNetconf({ ...base, mode }).mode).toBe(mode);
    expect(() => parseNetconf({ ...base, mode: 'l4' })).toThrow(expect.objectContaining({ code: 7 }));
  });
});
