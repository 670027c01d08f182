import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAULT_STEPS } from '../../node/datapath/test-hooks.js';
import { Journal } from '../../node/journal/journal.js';
import { missing } from '../support/capabilities.js';
import { NodeFixture } from './support/node-fixture.js';

/**
 * The plugin's recovery and housekeeping paths, driven as a container runtime drives it (a process per call)
 * in real network namespaces: a failed repeated ADD, an interrupted ADD, DEL after the netns went, CHECK, GC, an
 * empty node, the log. The ADD/DEL contract itself is in plugin-netns.test.ts.
 */
const skip = missing('root', 'netns', 'go-plugins');

describe.skipIf(skip)('vpc-lease-cni recovery and housekeeping in real network namespaces', () => {
  let f: NodeFixture;
  beforeAll(async () => {
    f = await NodeFixture.start();
    await f.seed(16);
  });
  afterAll(async () => {
    await f?.close();
  });

  const holderOf = async (containerId: string, ifName = 'eth0') => f.store.findByHolder(f.arn, containerId, ifName);
  const journal = () => new Journal(f.dataDir);

  it('undoes a repeated ADD that fails completely: no link, no claim, no record', async () => {
    const netns = f.addNetns();
    const containerId = 'readd-fail';
    expect((await f.run('ADD', { netns, containerId }, f.netconf('1.0.0'))).code).toBe(0);
    const failed = await f.run(
      'ADD',
      { netns, containerId, env: { VPC_LEASE_TEST_FAIL_AT: 'print-result' } },
      f.netconf('1.0.0'),
    );
    expect(failed.json).toMatchObject({ code: 999 });
    expect(f.podLinks(netns)).toEqual([]);
    expect(await holderOf(containerId)).toBeUndefined();
    expect(journal().read(containerId, 'eth0')).toBeUndefined();
  });

  it('returns the lease an interrupted ADD claimed when the journal holds only the intent', async () => {
    const netns = f.addNetns();
    const containerId = 'crash-1';
    const claimed = await f.store.claim(f.arn, { containerId, ifName: 'eth0', netns }, Date.now(), {
      checkExisting: false,
    });
    journal().createIntent({ containerId, ifName: 'eth0', netns, createdAtMs: Date.now() - 1000, pid: 999_999 });
    const add = await f.run('ADD', { netns, containerId }, f.netconf('1.0.0'));
    expect(add.code, add.stdout).toBe(0);
    expect((add.json as { ips: { address: string }[] }).ips[0]!.address).toBe(`${claimed.ip}/24`);
    expect(journal().read(containerId, 'eth0')?.ip).toBe(claimed.ip);
    expect((await f.run('DEL', { netns, containerId }, f.netconf('1.0.0'))).code).toBe(0);
    expect((await f.store.getLease(f.arn, claimed.ip))?.state).toBe('COOLDOWN');
  });

  it('DEL succeeds when the netns is already gone and still releases the lease', async () => {
    const netns = f.addNetns();
    const containerId = 'gone-1';
    expect((await f.run('ADD', { netns, containerId }, f.netconf('1.0.0'))).code).toBe(0);
    const name = netns.split('/').pop()!;
    execFileSync('ip', ['netns', 'del', name]);
    const del = await f.run('DEL', { netns, containerId }, f.netconf('1.0.0'));
    expect(del.code, del.stdout).toBe(0);
    expect(await holderOf(containerId)).toBeUndefined();
  });

  it('CHECK fails with code 101 once the pod link lost its address', async () => {
    const netns = f.addNetns();
    const containerId = 'check-1';
    const add = await f.run('ADD', { netns, containerId }, f.netconf('1.0.0'));
    const address = (add.json as { ips: { address: string }[] }).ips[0]!.address;
    execFileSync('ip', ['-n', netns.split('/').pop()!, 'addr', 'del', address, 'dev', 'eth0']);
    const check = await f.run('CHECK', { netns, containerId }, { ...f.netconf('1.0.0'), prevResult: add.json });
    expect(check.code).toBe(1);
    expect(check.json).toMatchObject({ code: 101 });
    expect((await f.run('DEL', { netns, containerId }, f.netconf('1.0.0'))).code).toBe(0);
  });

  it('GC releases the leases and links of attachments missing from cni.dev/valid-attachments', async () => {
    const pods = ['gc-1', 'gc-2', 'gc-3'].map((containerId) => ({ containerId, netns: f.addNetns() }));
    for (const p of pods) expect((await f.run('ADD', p, f.netconf('1.1.0'))).code).toBe(0);
    const valid = { 'cni.dev/valid-attachments': [{ containerID: 'gc-1', ifname: 'eth0' }] };
    // Inside the grace window nothing is released: those ADDs may still be in flight.
    const spared = await f.run('GC', {}, { ...f.netconf('1.1.0'), ...valid });
    expect(spared.code, spared.stdout).toBe(0);
    expect(await holderOf('gc-2')).toBeDefined();
    const gc = await f.run('GC', {}, { ...f.netconf('1.1.0', { gcGraceMs: 0 }), ...valid });
    expect(gc.code, gc.stdout).toBe(0);
    expect(await holderOf('gc-1')).toBeDefined();
    expect(await holderOf('gc-2')).toBeUndefined();
    expect(await holderOf('gc-3')).toBeUndefined();
    // The live pod keeps its ipvlan link and its host veth (on by default).
    expect(f.podLinks(pods[0]!.netns)).toEqual(['eth0', 'vh-eth0']);
    expect(f.podLinks(pods[1]!.netns)).toEqual([]);
    expect(journal().read('gc-2', 'eth0')).toBeUndefined();
    const noList = await f.run('GC', {}, f.netconf('1.1.0'));
    expect(noList.json).toMatchObject({ code: 7 });
    expect(await holderOf('gc-1')).toBeDefined();
    expect((await f.run('DEL', pods[0]!, f.netconf('1.1.0'))).code).toBe(0);
  });

  it('ADD on a node with nothing to claim reports 11 and leaves nothing behind', async () => {
    // STATUS's verdicts (this node stays "ready": a full pool is not unavailable) are in gc-status.test.ts.
    const empty = await f.startOtherImds('i-0fedcba9876543210');
    try {
      const emptyConf = f.netconf('1.1.0', { imdsEndpoint: empty.endpoint, dataDir: join(f.dir, 'empty-node') });
      const netns = f.addNetns();
      const add = await f.run('ADD', { netns, containerId: 'empty-1' }, emptyConf);
      expect(add.json).toMatchObject({ code: 11 });
      expect(f.podLinks(netns)).toEqual([]);
      expect(existsSync(join(f.dir, 'empty-node', 'attachments', 'empty-1~eth0.json'))).toBe(false);
    } finally {
      await empty.close();
    }
  });

  it('writes JSON lines to its log file and nothing but the result to stdout', async () => {
    // Its own ADD, failed ADD and DEL, read from where the log stood: it needs no other test's lines.
    const from = existsSync(f.logFile) ? readFileSync(f.logFile).length : 0;
    const netns = f.addNetns();
    const added = await f.run('ADD', { netns, containerId: 'log-1' }, f.netconf('1.0.0'));
    const failed = await f.run(
      'ADD',
      { netns: f.addNetns(), containerId: 'log-2', env: { VPC_LEASE_TEST_FAIL_AT: FAULT_STEPS[0] } },
      f.netconf('1.0.0'),
    );
    expect((await f.run('DEL', { netns, containerId: 'log-1' }, f.netconf('1.0.0'))).code).toBe(0);
    expect(JSON.parse(added.stdout)).toEqual(added.json);
    expect(JSON.parse(failed.stdout)).toMatchObject({ msg: expect.stringContaining('injected fault') });
    const lines = readFileSync(f.logFile).subarray(from).toString('utf8').trim().split('\n');
    const records = lines.map((line) => JSON.parse(line) as { level: string; msg: string; command?: string });
    expect(records.some((r) => r.msg === 'added' && r.command === 'ADD')).toBe(true);
    expect(records.some((r) => r.level === 'error' && r.msg === 'ADD failed')).toBe(true);
  });
});
