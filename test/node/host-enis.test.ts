import { execFile, spawn } from 'node:child_process';
import { lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { missing } from '../support/capabilities.js';

/**
 * node/deploy/host/vpc-lease-host-enis.sh (issue 26): the user-data step that keeps systemd-networkd and
 * amazon-ec2-net-utils off pod ENIs. Run with --files-only against a fake root (sysfs addresses) and a stand-in
 * IMDS; the .network file is then judged by systemd.network(5)'s [Match] rules for the keys it uses (Driver=,
 * Property=, with "!" inverting the list) and its place in networkd's lexical order, and the udev rule by
 * whether its add line can fire for a pod ENI.
 */
const run = promisify(execFile);
/** A minimal IMDSv2 (token, then the MAC given as argv[1]) that prints its port once it listens. */
const NETNS_IMDS = `
const mac = process.argv[1];
const s = require('node:http').createServer((req, res) => {
  if (req.method === 'PUT') return res.end('tok');
  res.end(req.url === '/latest/meta-data/mac' ? mac : '');
});
s.listen(0, '127.0.0.1', () => console.log(s.address().port));`;
const SCRIPT = resolve('node/deploy/host/vpc-lease-host-enis.sh');
const PRIMARY = { name: 'ens5', mac: '0a:ff:e1:47:45:f3' };
const POD_ENI = { name: 'ens6', mac: '0a:ff:e1:47:45:f4' };

/** The [Match] keys the file uses, evaluated as systemd.network(5) describes them. */
function networkMatches(text: string, device: Record<string, string>): boolean {
  const match = section(text, 'Match');
  return match.every(([key, raw]) => {
    const inverted = raw.startsWith('!');
    const items = (inverted ? raw.slice(1) : raw).split(/\s+/).filter((s) => s !== '');
    let result: boolean;
    if (key === 'Driver') result = items.some((glob) => globMatch(glob, device['ID_NET_DRIVER'] ?? ''));
    else if (key === 'Property')
      result = items.every((pair) => {
        const [k, v] = pair.split('=', 2) as [string, string];
        return device[k] === v;
      });
    else throw new Error(`the evaluator does not know [Match] ${key}=`);
    return inverted ? !result : result;
  });
}

function section(text: string, name: string): [string, string][] {
  const out: [string, string][] = [];
  let current = '';
  for (const line of text.split('\n').map((l) => l.trim())) {
    if (line === '' || line.startsWith('#')) continue;
    const header = /^\[(\w+)\]$/.exec(line);
    if (header) current = header[1]!;
    else if (current === name) {
      const at = line.indexOf('=');
      out.push([line.slice(0, at), line.slice(at + 1)]);
    }
  }
  return out;
}

function globMatch(glob: string, value: string): boolean {
  const re = glob
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${re}$`).test(value);
}

/** udev's add line: every `KEY=="value"` condition must hold for the event. */
function udevAddFires(rules: string, event: Record<string, string>): boolean {
  const line = rules.split('\n').find((l) => l.includes('ACTION=="add"'));
  if (!line) return false;
  return [...line.matchAll(/([A-Z]+(?:\{[\w]+\})?)=="([^"]*)"/g)].every(([, key, value]) =>
    value!.split('|').some((alt) => globMatch(alt, event[key!] ?? '')),
  );
}

describe('Host config: keep networkd and ec2-net-utils off pod ENIs', () => {
  let imds: Server;
  let imdsUrl = '';
  let answerMac = PRIMARY.mac;
  let root = '';
  const podEni = { INTERFACE: POD_ENI.name, ID_NET_DRIVER: 'ena' };
  const primary = { INTERFACE: PRIMARY.name, ID_NET_DRIVER: 'ena' };

  beforeAll(async () => {
    imds = createServer((req, res) => {
      if (req.method === 'PUT' && req.url === '/latest/api/token') return void res.writeHead(200).end('tok');
      if (req.headers['x-aws-ec2-metadata-token'] !== 'tok') return void res.writeHead(401).end();
      if (req.url === '/latest/meta-data/mac') return void res.writeHead(200).end(answerMac);
      res.writeHead(404).end();
    });
    await new Promise<void>((r) => imds.listen(0, '127.0.0.1', r));
    imdsUrl = `http://127.0.0.1:${(imds.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((r) => imds.close(r));
  });
  beforeEach(() => {
    answerMac = PRIMARY.mac;
    if (root) rmSync(root, { recursive: true, force: true });
    root = mkdtempSync(join(tmpdir(), 'vpc-lease-host-'));
    for (const dev of [PRIMARY, POD_ENI]) {
      mkdirSync(join(root, 'sys/class/net', dev.name), { recursive: true });
      writeFileSync(join(root, 'sys/class/net', dev.name, 'address'), `${dev.mac}\n`);
    }
  });

  const script = () =>
    run('bash', [SCRIPT, '--files-only'], {
      env: { ...process.env, VPC_LEASE_HOST_ROOT: root, VPC_LEASE_IMDS: imdsUrl },
    });
  const networkFile = () => join(root, 'etc/systemd/network/10-vpc-lease-pod-enis.network');
  const rulesFile = () => join(root, 'etc/udev/rules.d/99-vpc-policy-routes.rules');

  it('the .network file leaves pod ENIs unmanaged and never matches the boot ENI or other links', async () => {
    await script();
    const text = readFileSync(networkFile(), 'utf8');
    expect(section(text, 'Link')).toEqual([['Unmanaged', 'yes']]);
    expect(networkMatches(text, podEni)).toBe(true);
    expect(networkMatches(text, { INTERFACE: 'ens7', ID_NET_DRIVER: 'ixgbevf' })).toBe(true);
    expect(networkMatches(text, primary)).toBe(false);
    expect(networkMatches(text, { INTERFACE: 'vh-0123abcd', ID_NET_DRIVER: 'veth' })).toBe(false);
  });

  it('sorts before every file that would configure an ENI (networkd takes the first match)', async () => {
    await script();
    const name = '10-vpc-lease-pod-enis.network';
    for (const other of ['70-eks-ens5.network', '70-ens6.network', '80-ec2.network'])
      expect([other, name].sort()[0], other).toBe(name);
  });

  it('the udev rule starts ec2-net-utils for the boot ENI only', async () => {
    await script();
    const rules = readFileSync(rulesFile(), 'utf8');
    const event = (mac: string) => ({
      SUBSYSTEM: 'net',
      ACTION: 'add',
      'ENV{ID_NET_DRIVER}': 'ena',
      'ATTR{address}': mac,
    });
    expect(udevAddFires(rules, event(PRIMARY.mac))).toBe(true);
    expect(udevAddFires(rules, event(POD_ENI.mac))).toBe(false);
    expect(rules).toContain('RUN+="/usr/bin/systemctl enable --now --no-block policy-routes@$name.service"');
  });

  it('leaves a udev rule that is masked to /dev/null (EKS AMIs) masked', async () => {
    mkdirSync(join(root, 'etc/udev/rules.d'), { recursive: true });
    symlinkSync('/dev/null', rulesFile());
    await script();
    expect(lstatSync(rulesFile()).isSymbolicLink()).toBe(true);
  });

  it('finds the boot ENI by the MAC IMDS names, in any case', async () => {
    answerMac = POD_ENI.mac.toUpperCase(); // as if ens6 were the boot ENI
    await script();
    const text = readFileSync(networkFile(), 'utf8');
    expect(networkMatches(text, podEni)).toBe(false);
    expect(networkMatches(text, primary)).toBe(true);
  });

  it.skipIf(missing('root', 'netns'))(
    'live half: deletes ec2-net-utils policy rules (priority = table, 10000-19999) and no other rule',
    async () => {
      const ns = `vlhe-${process.pid}`;
      const ip = (...args: string[]) => run('ip', ['-n', ns, ...args]);
      await run('ip', ['netns', 'add', ns]);
      await ip('link', 'set', 'lo', 'up');
      // The IMDS stand-in must live in the namespace: the host's loopback is not reachable from it.
      const server = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', NETNS_IMDS, PRIMARY.mac], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      try {
        const port = await new Promise<string>((ok, fail) => {
          server.stdout.once('data', (d: Buffer) => ok(d.toString().trim()));
          server.once('exit', (code) => fail(new Error(`IMDS stand-in exited ${code}`)));
        });
        await ip('rule', 'add', 'from', '10.0.1.5', 'lookup', '10001', 'priority', '10001');
        await ip('rule', 'add', 'from', '10.0.1.6', 'lookup', '10001', 'priority', '10001');
        await ip('rule', 'add', 'from', '10.0.1.7', 'lookup', '1001', 'priority', '10001');
        await ip('rule', 'add', 'from', '10.0.1.8', 'lookup', '1001', 'priority', '512');
        await run('ip', ['netns', 'exec', ns, 'bash', SCRIPT], {
          env: { ...process.env, VPC_LEASE_HOST_ROOT: root, VPC_LEASE_IMDS: `http://127.0.0.1:${port}` },
        });
        const { stdout } = await ip('rule', 'show');
        expect(stdout).not.toMatch(/lookup 10001/);
        expect(stdout).toMatch(/10001:\s+from 10\.0\.1\.7 lookup 1001/);
        expect(stdout).toMatch(/512:\s+from 10\.0\.1\.8 lookup 1001/);
        expect(stdout).toMatch(/lookup main/);
      } finally {
        server.kill();
        await run('ip', ['netns', 'del', ns]);
      }
    },
  );

  it('refuses, writing nothing, when no interface has the boot ENI MAC or IMDS answers garbage', async () => {
    for (const [mac, message] of [
      ['0a:00:00:00:00:01', /no interface has the boot ENI's MAC 0a:00:00:00:00:01/],
      ['ens5; rm -rf /', /not one/],
    ] as const) {
      answerMac = mac;
      await expect(script()).rejects.toMatchObject({ code: 1, stderr: expect.stringMatching(message) });
      expect(() => readFileSync(networkFile())).toThrow(/ENOENT/);
    }
  });
});
