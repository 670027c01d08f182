import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, statSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Journal } from '../../node/journal/journal.js';
import { lockAttachment } from '../../node/journal/lock.js';
import type { NodePhase, NodeRecord } from '../../shared/domain/node.js';
import { missing } from '../support/capabilities.js';
import { NodeFixture, runProcess } from './support/node-fixture.js';

/**
 * Semantics kubelet and containerd rely on, driven as a runtime drives the plugin (a process per call): STATUS
 * answers "can this node serve ADDs at all" from its identity, the store and the node item's phase; GC releases
 * only its own network's dead attachments; two ADDs of one attachment never run side by side.
 */
const skip = missing('root', 'netns');

/** A TCP endpoint that accepts and never answers: an ADD pointed at it hangs in its first store request. */
async function blackHole(): Promise<{ endpoint: string; close(): Promise<void> }> {
  const sockets: Socket[] = [];
  const server = createServer((socket) => sockets.push(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

async function until(what: string, probe: () => boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe.skipIf(skip)('vpc-lease-cni STATUS, GC and serialized ADDs', () => {
  let f: NodeFixture;
  beforeAll(async () => {
    f = await NodeFixture.start();
    await f.seed(24);
  }, 120_000);
  afterAll(async () => {
    await f?.close();
  });

  const holderOf = (containerId: string, ifName = 'eth0') => f.store.findByHolder(f.arn, containerId, ifName);
  const addOk = async (containerId: string, netns: string, conf: Record<string, unknown>, ifName = 'eth0') => {
    const r = await f.run('ADD', { containerId, netns, ifName }, conf);
    expect(r.code, r.stdout).toBe(0);
  };
  const gc = async (conf: Record<string, unknown>, valid: [string, string][]) => {
    const attachments = valid.map(([containerID, ifname]) => ({ containerID, ifname }));
    const r = await f.run('GC', {}, { ...conf, gcGraceMs: 0, 'cni.dev/valid-attachments': attachments });
    expect(r.code, r.stdout).toBe(0);
  };

  describe('STATUS', () => {
    let version = 0;
    const setPhase = async (phase: NodePhase): Promise<void> => {
      const current = await f.store.getNode(f.arn);
      const record: NodeRecord = {
        instanceArn: f.arn,
        instanceId: f.imds.instanceId,
        instanceType: 'm5.large',
        availabilityZone: 'us-east-1a',
        podSubnetIds: [],
        phase,
        enis: [],
        maxPods: 29,
        createdAtMs: Date.now(),
        updatedAtMs: Date.now(),
        version: 1,
      };
      if (current) await f.store.updateNode({ ...record, version: current.version }, current.version);
      else await f.store.createNode(record);
      version += 1;
    };
    const status = (extra: Record<string, unknown> = {}) => f.run('STATUS', {}, f.netconf('1.1.0', extra));

    it('reports 50 while nothing provisioned the node, even with leases in the table', async () => {
      const r = await status();
      expect(r.code).toBe(1);
      expect(r.json).toMatchObject({ cniVersion: '1.1.0', code: 50, details: expect.stringMatching(/no node item/) });
      await setPhase('PROVISIONING');
      expect((await status()).json).toMatchObject({ code: 50, details: expect.stringMatching(/PROVISIONING/) });
    }, 120_000);

    it('is ready on a READY node whose every lease is claimed or in cooldown', async () => {
      await setPhase('READY');
      const ok = await status();
      expect(ok.code, ok.stdout).toBe(0);
      expect(ok.stdout).toBe('');
      const taken: string[] = [];
      for (let i = 0; i < 24; i++) {
        const lease = await f.store
          .claim(f.arn, { containerId: `full-${i}`, ifName: 'eth0', netns: '/x' }, Date.now(), { checkExisting: false })
          .catch(() => undefined);
        if (!lease) break;
        taken.push(lease.ip);
      }
      expect(await f.store.countClaimable(f.arn, Date.now())).toBe(0);
      const full = await status();
      expect(full.code, full.stdout).toBe(0);
      // Half of them back, in a long cooldown: still nothing claimable, still ready.
      for (let i = 0; i < taken.length / 2; i++)
        await f.store.release(f.arn, { containerId: `full-${i}`, ifName: 'eth0' }, Date.now(), 3_600_000);
      expect(await f.store.countClaimable(f.arn, Date.now())).toBe(0);
      expect((await status()).code).toBe(0);
      for (let i = 0; i < taken.length; i++)
        await f.store.release(f.arn, { containerId: `full-${i}`, ifName: 'eth0' }, Date.now() - 7_200_000, 0);
    }, 120_000);

    it('stays ready with its store down or refusing once READY in this boot; a node never READY in it reports 50', async () => {
      expect((await status()).code).toBe(0);
      const down = { dynamoEndpoint: 'http://127.0.0.1:9', storeTimeoutMs: 300 };
      const outage = await status(down);
      expect(outage.code, outage.stdout).toBe(0);
      const noTable = await status({ tableName: 'no-such-table' });
      expect(noTable.code, noTable.stdout).toBe(0);
      // The same failures on a node with no READY recorded for this boot (a fresh data dir).
      const fresh = await status({ ...down, dataDir: join(f.dir, 'never-ready') });
      expect(fresh.json).toMatchObject({
        code: 50,
        details: expect.stringMatching(/not been seen READY since this boot/),
      });
      const freshNoTable = await status({ tableName: 'no-such-table', dataDir: join(f.dir, 'never-ready') });
      expect(freshNoTable.json).toMatchObject({ code: 50, details: expect.stringMatching(/refused the request/) });
    }, 120_000);

    it('reports 50 without an identity and on a DRAINING node', async () => {
      const noImds = await status({ imdsEndpoint: 'http://127.0.0.1:9', dataDir: join(f.dir, 'no-identity') });
      expect(noImds.json).toMatchObject({ code: 50, details: expect.stringMatching(/no instance identity/) });
      await setPhase('DRAINING');
      expect((await status()).json).toMatchObject({ code: 50, details: expect.stringMatching(/DRAINING/) });
      await setPhase('READY');
      expect((await status()).code).toBe(0);
      expect(version).toBeGreaterThan(0);
    }, 120_000);
  });

  describe('GC', () => {
    it('with two vpc-lease networks on a node (Multus), releases only its own network’s dead attachments', async () => {
      const netA = f.netconf('1.1.0', { name: 'net-a' });
      const netB = f.netconf('1.1.0', { name: 'net-b' });
      // Each network's link in its own netns: two L2 links in one netns both want the default route (EEXIST), a
      // datapath matter apart from what GC decides, which is keyed by (containerId, ifName) and the network.
      const pods = ['mx-1', 'mx-2'].map((containerId) => ({ containerId, netns: f.addNetns(), netnsB: f.addNetns() }));
      for (const p of pods) {
        await addOk(p.containerId, p.netns, netA, 'eth0');
        await addOk(p.containerId, p.netnsB, netB, 'net1');
      }
      expect((await holderOf('mx-1', 'eth0'))?.holder?.network).toBe('net-a');
      expect((await holderOf('mx-1', 'net1'))?.holder?.network).toBe('net-b');
      // The runtime GCs net-a listing net-a's live attachments only: mx-2 is gone from net-a.
      await gc(netA, [['mx-1', 'eth0']]);
      expect(await holderOf('mx-2', 'eth0')).toBeUndefined();
      expect(await holderOf('mx-1', 'eth0')).toBeDefined();
      expect(await holderOf('mx-1', 'net1')).toBeDefined();
      expect(await holderOf('mx-2', 'net1')).toBeDefined();
      expect(f.podLinks(pods[1]!.netns)).toEqual([]);
      expect(f.podLinks(pods[1]!.netnsB)).toContain('net1');
      await gc(netB, [['mx-1', 'net1']]);
      expect(await holderOf('mx-2', 'net1')).toBeUndefined();
      expect(await holderOf('mx-1', 'net1')).toBeDefined();
      const p1 = pods[0]!;
      expect((await f.run('DEL', { containerId: p1.containerId, netns: p1.netns }, netA)).code).toBe(0);
      expect((await f.run('DEL', { containerId: p1.containerId, netns: p1.netnsB, ifName: 'net1' }, netB)).code).toBe(
        0,
      );
    }, 120_000);

    it('leaves a lease without a recorded network alone unless gcUnnamedLeases says the node runs one network', async () => {
      const legacy = await f.store.claim(
        f.arn,
        { containerId: 'legacy-1', ifName: 'eth0', netns: '/var/run/netns/gone' },
        Date.now() - 1_000,
        { checkExisting: false },
      );
      expect(legacy.holder?.network).toBeUndefined();
      await gc(f.netconf('1.1.0'), []);
      expect((await f.store.getLease(f.arn, legacy.ip))?.state).toBe('CLAIMED');
      await gc(f.netconf('1.1.0', { gcUnnamedLeases: true }), []);
      expect((await f.store.getLease(f.arn, legacy.ip))?.state).toBe('COOLDOWN');
    }, 120_000);

    it('leaves alone a lease whose attachment a stalled ADD still holds locked, and releases it once unlocked', async () => {
      const conf = f.netconf('1.1.0', { name: 'stall-net' });
      const holder = { containerId: 'stall-1', ifName: 'eth0', netns: '/var/run/netns/gone', network: 'stall-net' };
      const lease = await f.store.claim(f.arn, holder, Date.now() - 1_000, { checkExisting: false });
      // The stalled ADD: past the grace (0 here), not in the runtime’s list yet, and holding the attachment’s lock.
      const stalled = await lockAttachment(f.dataDir, 'stall-1', 'eth0', 0);
      try {
        await gc(conf, []);
        expect((await f.store.getLease(f.arn, lease.ip))?.state).toBe('CLAIMED');
      } finally {
        await stalled.release();
      }
      await gc(conf, []);
      expect((await f.store.getLease(f.arn, lease.ip))?.state).toBe('COOLDOWN');
    }, 120_000);

    it('after a "reboot" that took every netns, returns every dead container’s lease in one GC', async () => {
      // Its own network, so its GC with an empty list cannot touch the other tests' attachments.
      const conf = f.netconf('1.1.0', { name: 'reboot-net' });
      const pods = ['rb-1', 'rb-2', 'rb-3'].map((containerId) => ({ containerId, netns: f.addNetns() }));
      for (const p of pods) await addOk(p.containerId, p.netns, conf);
      const ips = await Promise.all(pods.map(async (p) => (await holderOf(p.containerId))!.ip));
      for (const p of pods) execFileSync('ip', ['netns', 'del', p.netns.split('/').pop()!]);
      await gc(conf, []);
      for (const ip of ips) expect((await f.store.getLease(f.arn, ip))?.state).toBe('COOLDOWN');
      expect(new Journal(f.dataDir).list().filter((r) => r.containerId.startsWith('rb-'))).toEqual([]);
    }, 120_000);
  });

  describe('serialized ADDs', () => {
    it('never runs a second ADD beside a hung one, however old, and takes over once its process died', async () => {
      const hole = await blackHole();
      const netns = f.addNetns();
      const containerId = 'hung-1';
      const journal = new Journal(f.dataDir);
      // The first ADD: a real plugin process stuck in its claim's first store request.
      const first = spawn(f.cni, [], {
        env: {
          ...f.baseEnv(),
          CNI_COMMAND: 'ADD',
          CNI_CONTAINERID: containerId,
          CNI_IFNAME: 'eth0',
          CNI_NETNS: netns,
          CNI_PATH: '/usr/lib/cni',
        },
        stdio: ['pipe', 'ignore', 'ignore'],
      });
      const exited = new Promise((resolve) => first.on('close', resolve));
      first.stdin.end(JSON.stringify(f.netconf('1.1.0', { dynamoEndpoint: hole.endpoint, storeTimeoutMs: 60_000 })));
      try {
        await until('the hung ADD to publish its intent', () => journal.read(containerId, 'eth0') !== undefined);
        const intent = journal.read(containerId, 'eth0')!;
        expect(intent.pid).toBe(first.pid);
        // Age it past the old 120 s in-flight limit: only the lock stands between the two now.
        await journal.write({ ...intent, createdAtMs: Date.now() - 10 * 60_000 });
        const second = await f.run('ADD', { netns, containerId }, f.netconf('1.1.0', { attachmentLockWaitMs: 500 }));
        expect(second.code).toBe(1);
        expect(second.json).toMatchObject({ code: 11, msg: expect.stringMatching(/still running after 500 ms/) });
        expect(await holderOf(containerId)).toBeUndefined();
        expect(f.podLinks(netns)).toEqual([]);
        // The same for a DEL: it waits for the ADD rather than racing it.
        const del = await f.run('DEL', { netns, containerId }, f.netconf('1.1.0', { attachmentLockWaitMs: 200 }));
        expect(del.json).toMatchObject({ code: 11 });
      } finally {
        first.kill('SIGKILL');
        await exited;
        await hole.close();
      }
      // The kernel dropped the dead process's lock: the runtime's retry proceeds, and finds the dead one's intent.
      const retry = await f.run('ADD', { netns, containerId }, f.netconf('1.1.0', { attachmentLockWaitMs: 500 }));
      expect(retry.code, retry.stdout).toBe(0);
      expect((await holderOf(containerId))?.ip).toBe(journal.read(containerId, 'eth0')?.ip);
      expect((await f.run('DEL', { netns, containerId }, f.netconf('1.1.0'))).code).toBe(0);
    }, 120_000);
  });

  describe('node hardening', () => {
    const delEnv = (extra: Record<string, string | undefined> = {}) => {
      const env: Record<string, string> = {
        ...f.baseEnv(),
        CNI_COMMAND: 'DEL',
        CNI_CONTAINERID: 'harden-1',
        CNI_IFNAME: 'eth0',
        CNI_PATH: '/usr/lib/cni',
      };
      for (const [k, v] of Object.entries(extra)) {
        if (v === undefined) delete env[k];
        else env[k] = v;
      }
      return env;
    };

    it('creates its log file 0640 under a umask of 000, and narrows one an older version left wider', async () => {
      const logFile = join(f.dir, 'hardening', 'cni.log');
      const stdin = JSON.stringify(f.netconf('1.1.0', { logFile }));
      // The runtime's umask is not ours to choose: run the plugin under the widest one.
      const underUmask0 = () => runProcess('/bin/sh', ['-c', 'umask 000 && exec "$0"', f.cni], delEnv(), stdin);
      const first = await underUmask0();
      expect(first.code, first.stdout).toBe(0);
      expect(statSync(logFile).mode & 0o777).toBe(0o640);
      expect(statSync(join(f.dir, 'hardening')).mode & 0o777).toBe(0o750);
      chmodSync(logFile, 0o666);
      expect((await underUmask0()).code).toBe(0);
      expect(statSync(logFile).mode & 0o777).toBe(0o640);
    }, 120_000);

    it('refuses test-only overrides without test mode, naming them, and honours them with it', async () => {
      const stdin = JSON.stringify(f.netconf('1.1.0'));
      const native = await runProcess(
        f.cni,
        [],
        delEnv({ VPC_LEASE_TEST_MODE: undefined, VPC_LEASE_TEST_LINK_KIND: undefined, VPC_LEASE_NATIVE_DIR: f.dir }),
        stdin,
      );
      expect(native.json).toMatchObject({
        code: 4,
        msg: expect.stringMatching(/VPC_LEASE_NATIVE_DIR is honoured only in test mode/),
      });
      // The fixture's IMDS is on loopback: without test mode the netconf's imdsEndpoint is refused with code 7.
      const imds = await runProcess(
        f.cni,
        [],
        delEnv({ VPC_LEASE_TEST_MODE: undefined, VPC_LEASE_TEST_LINK_KIND: undefined }),
        stdin,
      );
      expect(imds.json).toMatchObject({
        code: 7,
        details: expect.stringMatching(/imdsEndpoint: .* only in test mode/),
      });
      const cleartext = await runProcess(
        f.cni,
        [],
        delEnv(),
        JSON.stringify(f.netconf('1.1.0', { dynamoEndpoint: 'http://10.0.0.9:8000' })),
      );
      expect(cleartext.json).toMatchObject({
        code: 7,
        details: expect.stringMatching(/dynamoEndpoint: plain http to 10\.0\.0\.9/),
      });
      const ok = await runProcess(f.cni, [], delEnv(), stdin);
      expect(ok.code, ok.stdout).toBe(0);
    }, 120_000);
  });
});
