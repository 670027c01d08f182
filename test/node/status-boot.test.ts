import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runSkel } from '../../node/cni/skel.js';
import { pluginHandlers } from '../../node/plugin/handlers.js';
import { readyBootFile } from '../../node/plugin/status.js';
import { openLeaseStore } from '../../node/store/open-store.js';
import { instanceArn } from '../../shared/domain/arn.js';
import type { NodePhase, NodeRecord } from '../../shared/domain/node.js';
import { createSdkDynamoApi } from '../../shared/dynamo/sdk-client.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import { createTableInput } from '../../shared/lease-store/table.js';
import { type DynaliteHandle, startDynalite } from '../support/dynalite.js';
import { type FakeImds, startFakeImds } from './support/fake-imds.js';

/**
 * STATUS against a real store (dynalite) and IMDS, in-process so the clock and the boot id are injected: no test
 * waits out a grace period, and a "reboot" is a new boot id. Each rule beside its opposite.
 */
const BOOT_A = '0b5e1c9a-0000-4000-8000-00000000000a';
const BOOT_B = '0b5e1c9a-0000-4000-8000-00000000000b';
const DOWN = 'http://127.0.0.1:9';

describe('STATUS: 50 only for node-local causes (dynalite, IMDS, injected clock and boot id)', () => {
  let dynalite: DynaliteHandle;
  let imds: FakeImds;
  let dir: string;
  let store: DynamoLeaseStore;
  let arn: string;
  const tableName = 'vpc-lease-status';
  const clock = { nowMs: Date.now(), bootId: BOOT_A };

  beforeAll(async () => {
    dynalite = await startDynalite();
    imds = await startFakeImds('i-0123456789abcdef0');
    arn = instanceArn('us-east-1', '123456789012', imds.instanceId);
    dir = mkdtempSync(join(tmpdir(), 'vpc-lease-status-'));
    const credentials = { accessKeyId: 'test', secretAccessKey: 'test' };
    const ddb = new DynamoDBClient({ endpoint: dynalite.endpoint, region: 'us-east-1', credentials });
    await ddb.send(new CreateTableCommand(createTableInput(tableName)));
    ddb.destroy();
    store = new DynamoLeaseStore({
      api: createSdkDynamoApi({ endpoint: dynalite.endpoint, region: 'us-east-1', credentials }),
      tableName,
    });
  });
  afterAll(async () => {
    await imds?.close();
    await dynalite?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const dataDir = () => join(dir, 'data');
  const logFile = () => join(dir, 'cni.log');

  async function call(command: 'STATUS' | 'ADD', extra: Record<string, unknown> = {}) {
    const handlers = pluginHandlers({
      env: { VPC_LEASE_TEST_MODE: '1' },
      nowMs: () => clock.nowMs,
      bootId: () => clock.bootId,
      openStore: openLeaseStore,
      openDatapath: () => Promise.reject(new Error('no datapath in this test')),
    });
    const netconf = {
      cniVersion: '1.1.0',
      name: 'vpc-lease',
      type: 'vpc-lease-cni',
      tableName,
      dynamoEndpoint: dynalite.endpoint,
      imdsEndpoint: imds.endpoint,
      storeTimeoutMs: 300,
      dataDir: dataDir(),
      logFile: logFile(),
      ...extra,
    };
    let stdout = '';
    const code = await runSkel(handlers, {
      env: {
        CNI_COMMAND: command,
        CNI_PATH: '/opt/cni/bin',
        // ADD never gets past its claim here (the store fails first), so the host's own netns is never touched.
        ...(command === 'ADD' ? { CNI_CONTAINERID: 'c-add', CNI_NETNS: '/proc/self/ns/net', CNI_IFNAME: 'eth0' } : {}),
      },
      readStdin: () => JSON.stringify(netconf),
      writeStdout: (text) => {
        stdout += text;
      },
    });
    return { code, json: stdout ? (JSON.parse(stdout) as Record<string, unknown>) : undefined };
  }

  async function setPhase(phase: NodePhase): Promise<void> {
    const current = await store.getNode(arn);
    const record: NodeRecord = {
      instanceArn: arn,
      instanceId: imds.instanceId,
      instanceType: 'm5.large',
      availabilityZone: 'us-east-1a',
      podSubnetIds: [],
      phase,
      enis: [],
      maxPods: 29,
      createdAtMs: clock.nowMs,
      updatedAtMs: clock.nowMs,
      version: 1,
    };
    if (current) await store.updateNode({ ...record, version: current.version }, current.version);
    else await store.createNode(record);
  }

  const logLines = () =>
    existsSync(logFile())
      ? readFileSync(logFile(), 'utf8')
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as Record<string, unknown>)
      : [];

  it('a fresh hook-less node: 50 before its node item and while PROVISIONING, 0 once READY (recorded for this boot)', async () => {
    expect((await call('STATUS')).json).toMatchObject({ code: 50, details: expect.stringMatching(/no node item/) });
    await setPhase('PROVISIONING');
    expect((await call('STATUS')).json).toMatchObject({ code: 50, details: expect.stringMatching(/PROVISIONING/) });
    expect(existsSync(readyBootFile(dataDir()))).toBe(false);
    await setPhase('READY');
    expect(await call('STATUS')).toEqual({ code: 0, json: undefined });
    expect(JSON.parse(readFileSync(readyBootFile(dataDir()), 'utf8'))).toMatchObject({ bootId: BOOT_A });
  });

  it('an unreachable store for 10 min (5× the old 120 s grace): still 0 in the boot that saw READY, 50 after a reboot', async () => {
    clock.nowMs += 600_000;
    const down = await call('STATUS', { dynamoEndpoint: DOWN });
    expect(down, JSON.stringify(down.json)).toEqual({ code: 0, json: undefined });
    expect(logLines().at(-1)).toMatchObject({
      level: 'warn',
      reason: expect.stringMatching(/lease store is unreachable/),
    });
    clock.bootId = BOOT_B;
    try {
      expect((await call('STATUS', { dynamoEndpoint: DOWN })).json).toMatchObject({
        code: 50,
        details: expect.stringMatching(/not been seen READY since this boot, and the lease store is unreachable/),
      });
    } finally {
      clock.bootId = BOOT_A;
    }
  });

  it('a wrong table name: 0 in the boot that saw READY, 50 on a node never READY in this boot', async () => {
    const wrong = await call('STATUS', { tableName: 'no-such-table' });
    expect(wrong, JSON.stringify(wrong.json)).toEqual({ code: 0, json: undefined });
    expect(logLines().at(-1)).toMatchObject({ reason: expect.stringMatching(/refused the request/) });
    clock.bootId = BOOT_B;
    try {
      expect((await call('STATUS', { tableName: 'no-such-table' })).json).toMatchObject({
        code: 50,
        details: expect.stringMatching(/refused the request: ResourceNotFoundException/),
      });
    } finally {
      clock.bootId = BOOT_A;
    }
  });

  it('ADD under a wrong table or a down store: code 11 naming the table, and the failure in the plugin log', async () => {
    const wrong = await call('ADD', { tableName: 'no-such-table' });
    expect(wrong.json).toMatchObject({
      code: 11,
      msg: expect.stringMatching(/lease table no-such-table .* refused the request: ResourceNotFoundException/),
    });
    expect(logLines().at(-1)).toMatchObject({ level: 'error', msg: 'ADD failed', code: 11 });
    const down = await call('ADD', { dynamoEndpoint: DOWN });
    expect(down.json).toMatchObject({
      code: 11,
      msg: expect.stringMatching(/lease table vpc-lease-status .*127\.0\.0\.1:9\) is unreachable/),
    });
  });

  it('DRAINING: 50 even in the boot that saw READY; READY again: 0', async () => {
    await setPhase('DRAINING');
    expect((await call('STATUS')).json).toMatchObject({ code: 50, details: expect.stringMatching(/DRAINING/) });
    await setPhase('READY');
    expect((await call('STATUS')).code).toBe(0);
  });

  it('a new boot id with the store answering READY: 0, and the record moves to the new boot', async () => {
    clock.bootId = BOOT_B;
    expect((await call('STATUS')).code).toBe(0);
    expect(JSON.parse(readFileSync(readyBootFile(dataDir()), 'utf8'))).toMatchObject({ bootId: BOOT_B });
  });
});
