import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  install,
  installOptionsFromArgs,
  type ReadyWait,
  SHIM_SOURCE_FILE,
  SUPPORT_FILES,
} from '../../node/installer/install.js';
import { storeReadiness } from '../../node/installer/readiness.js';
import { instanceArn } from '../../shared/domain/arn.js';
import type { NodePhase, NodeRecord } from '../../shared/domain/node.js';
import { createSdkDynamoApi } from '../../shared/dynamo/sdk-client.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import { createTableInput } from '../../shared/lease-store/table.js';
import { type DynaliteHandle, startDynalite } from '../support/dynalite.js';
import { type FakeImds, startFakeImds } from './support/fake-imds.js';

/**
 * The installer's wait for READY against a real store (dynalite) and IMDS: the readiness probe is the real one
 * (identity, GetItem of the node item); only the sleep between polls is replaced, and it is where the test moves
 * the node item along, so nothing waits on the wall clock.
 */
describe('install waits for the node to be READY in the store (dynalite, IMDS)', () => {
  let dynalite: DynaliteHandle;
  let imds: FakeImds;
  let store: DynamoLeaseStore;
  let arn: string;
  let dir: string;
  const tableName = 'vpc-lease-install';

  beforeAll(async () => {
    dynalite = await startDynalite();
    imds = await startFakeImds('i-0fedcba9876543210');
    arn = instanceArn('us-east-1', '123456789012', imds.instanceId, 'aws');
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
  });

  let binDir: string;
  let confDir: string;
  let source: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'vpc-lease-install-ready-'));
    const dist = join(dir, 'dist');
    mkdirSync(dist);
    for (const file of [...SUPPORT_FILES, SHIM_SOURCE_FILE]) writeFileSync(join(dist, file), 'x');
    source = join(dist, 'vpc-lease-cni');
    writeFileSync(source, '#!/bin/sh\n', { mode: 0o755 });
    binDir = join(dir, 'bin');
    confDir = join(dir, 'net.d');
    return () => rmSync(dir, { recursive: true, force: true });
  });

  const conflist = () => join(confDir, '10-vpc-lease.conflist');
  const binaryInstalled = () => existsSync(join(binDir, 'vpc-lease-cni'));

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
      createdAtMs: Date.now(),
      updatedAtMs: Date.now(),
      version: 1,
    };
    if (current) await store.updateNode({ ...record, version: current.version }, current.version);
    else await store.createNode(record);
  }

  /** Runs the installer with the real probe; `onSleep(n)` runs at the n-th pause between polls. */
  async function run(extra: { tableName?: string; timeoutS?: number }, onSleep: (n: number) => Promise<void>) {
    const config = {
      tableName: extra.tableName ?? tableName,
      dynamoEndpoint: dynalite.endpoint,
      imdsEndpoint: imds.endpoint,
      dataDir: join(dir, 'data'),
      logFile: join(dir, 'cni.log'),
    };
    const args = ['--bin-dir', binDir, '--conf-dir', confDir, '--service-cidrs', '10.96.0.0/12', '--chain', ''];
    if (extra.timeoutS) args.push('--ready-timeout-s', String(extra.timeoutS));
    args.push('--config', JSON.stringify(config));
    const options = installOptionsFromArgs(args, {}, source);
    const env = { VPC_LEASE_TEST_MODE: '1' };
    const clock = { nowMs: 0, sleeps: 0, lines: [] as string[] };
    const wait: ReadyWait = {
      probe: storeReadiness(options.pluginConfig, options.networkName, env, () => Date.now()),
      sleep: async (ms) => {
        clock.sleeps += 1;
        clock.nowMs += ms;
        await onSleep(clock.sleeps);
      },
      nowMs: () => clock.nowMs,
      log: (line) => clock.lines.push(line),
    };
    return { clock, result: install(options, wait) };
  }

  it('no node item: binaries at once, no conflist; PROVISIONING: still none; READY: the conflist appears', async () => {
    const states: string[] = [];
    const { clock, result } = await run({}, async (n) => {
      states.push(`${binaryInstalled()}/${existsSync(conflist())}`);
      if (n === 2) await setPhase('PROVISIONING');
      if (n === 4) await setPhase('READY');
    });
    await expect(result).resolves.toMatchObject({ written: 'ready' });
    expect(states).toEqual(['true/false', 'true/false', 'true/false', 'true/false']);
    expect(existsSync(conflist())).toBe(true);
    expect(clock.lines).toEqual([
      expect.stringMatching(/no node item in the lease table/),
      expect.stringMatching(/phase PROVISIONING/),
    ]);
  });

  it('negative control: a node that never becomes READY (or a wrong table) gets no conflist', async () => {
    await setPhase('PROVISIONING');
    const provisioning = await run({ timeoutS: 60 }, async () => undefined);
    await expect(provisioning.result).rejects.toThrow(/not READY after 6\d s \(the node is not provisioned yet/);
    expect(binaryInstalled()).toBe(true);
    expect(existsSync(conflist())).toBe(false);
    await setPhase('READY');
    const wrongTable = await run({ tableName: 'no-such-table', timeoutS: 30 }, async () => undefined);
    await expect(wrongTable.result).rejects.toThrow(/the lease store refused the request: ResourceNotFoundException/);
    expect(existsSync(conflist())).toBe(false);
  });
});
