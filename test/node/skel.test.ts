import { describe, expect, it } from 'vitest';
import { CniError } from '../../node/cni/errors.js';
import { type CniHandlers, type CniRequest, runSkel } from '../../node/cni/skel.js';
import { SUPPORTED_VERSIONS } from '../../node/cni/version.js';
import { NoFreeLeaseError, StoreUnavailableError, ValidationError } from '../../shared/errors.js';

interface Outcome {
  code: number;
  out: Record<string, unknown> | undefined;
  calls: CniRequest[];
}

const ENV = { CNI_CONTAINERID: 'abc', CNI_NETNS: '/var/run/netns/x', CNI_IFNAME: 'eth0', CNI_PATH: '/opt/cni/bin' };

async function skel(
  env: Record<string, string>,
  stdin: string,
  behaviour: (req: CniRequest) => Promise<Record<string, unknown> | undefined> = async () => ({ ok: true }),
): Promise<Outcome> {
  const calls: CniRequest[] = [];
  const handler = async (req: CniRequest) => {
    calls.push(req);
    return behaviour(req);
  };
  const handlers: CniHandlers = { ADD: handler, DEL: handler, CHECK: handler, GC: handler, STATUS: handler };
  let printed = '';
  const code = await runSkel(handlers, {
    env,
    readStdin: () => stdin,
    writeStdout: (t) => {
      printed += t;
    },
  });
  return { code, out: printed ? (JSON.parse(printed) as Record<string, unknown>) : undefined, calls };
}

const conf = (version: string): string => JSON.stringify({ cniVersion: version, name: 'n', type: 't' });

describe('runSkel', () => {
  it('prints the supported versions for VERSION without calling a handler', async () => {
    const r = await skel({ CNI_COMMAND: 'VERSION' }, '');
    expect(r.code).toBe(0);
    expect(r.out).toEqual({ cniVersion: '1.1.0', supportedVersions: [...SUPPORTED_VERSIONS] });
    expect(r.calls).toHaveLength(0);
  });

  it('reports code 4 when CNI_COMMAND is missing or unknown', async () => {
    for (const env of [{ ...ENV }, { ...ENV, CNI_COMMAND: 'ATTACH' }]) {
      const r = await skel(env, conf('1.0.0'));
      expect(r.code).toBe(1);
      expect(r.out).toMatchObject({ code: 4 });
      expect(r.calls).toHaveLength(0);
    }
  });

  it('names every missing variable with code 4 when ADD lacks its environment', async () => {
    const r = await skel({ CNI_COMMAND: 'ADD', CNI_PATH: '/x' }, conf('1.0.0'));
    expect(r.out).toMatchObject({ code: 4 });
    expect(String(r.out?.['msg'])).toContain('CNI_CONTAINERID,CNI_NETNS,CNI_IFNAME');
  });

  it('lets DEL run without CNI_NETNS (the runtime may have lost it)', async () => {
    const { CNI_NETNS: _drop, ...env } = ENV;
    const r = await skel({ ...env, CNI_COMMAND: 'DEL' }, conf('1.0.0'), async () => undefined);
    expect(r.code).toBe(0);
    expect(r.out).toBeUndefined();
    expect(r.calls[0]?.netns).toBe('');
  });

  it('refuses container ids and interface names the kernel or the spec would refuse', async () => {
    for (const bad of [{ CNI_CONTAINERID: '-x' }, { CNI_IFNAME: 'a/b' }, { CNI_IFNAME: 'x'.repeat(16) }]) {
      const r = await skel({ ...ENV, CNI_COMMAND: 'ADD', ...bad }, conf('1.0.0'));
      expect(r.out).toMatchObject({ code: 4 });
      expect(r.calls).toHaveLength(0);
    }
  });

  it('reports code 6 for a netconf that is not a JSON object', async () => {
    for (const stdin of ['{"cniVersion": "1.0.0"', '', '[1]', 'null']) {
      const r = await skel({ ...ENV, CNI_COMMAND: 'ADD' }, stdin);
      expect(r.out).toMatchObject({ code: 6 });
    }
  });

  it('reports code 1 for a version it does not speak, and for commands the version predates', async () => {
    expect((await skel({ ...ENV, CNI_COMMAND: 'ADD' }, conf('2.0.0'))).out).toMatchObject({ code: 1 });
    expect((await skel({ ...ENV, CNI_COMMAND: 'ADD' }, JSON.stringify({ name: 'n' }))).out).toMatchObject({ code: 1 });
    expect((await skel({ ...ENV, CNI_COMMAND: 'CHECK' }, conf('0.3.1'))).out).toMatchObject({ code: 1 });
    expect((await skel({ ...ENV, CNI_COMMAND: 'GC' }, conf('1.0.0'))).out).toMatchObject({ code: 1 });
    expect((await skel({ ...ENV, CNI_COMMAND: 'STATUS' }, conf('1.0.0'))).out).toMatchObject({ code: 1 });
    expect((await skel({ ...ENV, CNI_COMMAND: 'CHECK' }, conf('0.4.0'))).code).toBe(0);
  });

  it('prints errors in the requested version with the mapped code', async () => {
    const cases: [unknown, number][] = [
      [new NoFreeLeaseError('arn'), 11],
      [new StoreUnavailableError('down'), 11],
      [new ValidationError('bad', ['x: bad']), 7],
      [new CniError(3, 'gone'), 3],
      [new Error('boom'), 999],
    ];
    for (const [err, code] of cases) {
      const r = await skel({ ...ENV, CNI_COMMAND: 'ADD' }, conf('0.4.0'), async () => {
        throw err;
      });
      expect(r.code).toBe(1);
      expect(r.out).toMatchObject({ cniVersion: '0.4.0', code });
      expect(typeof r.out?.['msg']).toBe('string');
    }
  });

  it('parses CNI_ARGS into pairs and rejects a malformed pair with code 4', async () => {
    const ok = await skel(
      { ...ENV, CNI_COMMAND: 'ADD', CNI_ARGS: 'K8S_POD_NAME=web;K8S_POD_NAMESPACE=prod' },
      conf('1.0.0'),
    );
    expect(ok.calls[0]?.args).toEqual({ K8S_POD_NAME: 'web', K8S_POD_NAMESPACE: 'prod' });
    const bad = await skel({ ...ENV, CNI_COMMAND: 'ADD', CNI_ARGS: 'novalue' }, conf('1.0.0'));
    expect(bad.out).toMatchObject({ code: 4 });
  });
});
