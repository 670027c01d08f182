import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CniCode } from '../../node/cni/errors.js';
import { buildCni } from '../../packaging/build.js';
import { instanceArn } from '../../shared/domain/arn.js';
import { createSdkDynamoApi } from '../../shared/dynamo/sdk-client.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import { createTableInput } from '../../shared/lease-store/table.js';
import { type FakeImds, startFakeImds } from '../node/support/fake-imds.js';
import { runProcess } from '../node/support/node-fixture.js';
import { type DynaliteHandle, startDynalite } from '../support/dynalite.js';
import { newLease } from './lease-model.js';

/**
 * Fuzz of the plugin's input: stdin and the CNI_* environment, each case valid except for one broken part whose
 * CNI error code the spec fixes. The built binary must answer exit 1 with that code in its error JSON — never a
 * crash or a stack trace — and change nothing: every lease stays FREE, no journal entry appears, IMDS is not
 * even asked. No root needed: every case fails before the datapath. No case reaches DynamoDB either: the node's
 * credentials come from IMDS, which is asserted never asked, so the IAM-enforcing endpoint would have no request
 * to judge; dynalite stands behind the netconf's endpoint only so that a wrong answer would show as a change.
 */
interface FuzzCase {
  readonly what: string;
  readonly env: Record<string, string | undefined>;
  readonly stdin: string;
  readonly code: number;
}

let dir: string;
let cni: string;
let dynalite: DynaliteHandle;
let imds: FakeImds;
let store: DynamoLeaseStore;
let arn: string;
let tableName: string;

const dataDir = (): string => join(dir, 'data');

function baseConf(): Record<string, unknown> {
  return {
    cniVersion: '1.0.0',
    name: 'vpc-lease',
    type: 'vpc-lease-cni',
    dataDir: dataDir(),
    logFile: join(dir, 'log', 'cni.log'),
    tableName,
    imdsEndpoint: imds.endpoint,
    dynamoEndpoint: dynalite.endpoint,
  };
}

function baseEnv(command = 'ADD'): Record<string, string> {
  return {
    PATH: process.env['PATH'] ?? '/usr/bin:/bin',
    // The fake IMDS is on loopback: an IMDS override is honoured only in test mode.
    VPC_LEASE_TEST_MODE: '1',
    CNI_COMMAND: command,
    CNI_CONTAINERID: 'fuzz0',
    CNI_NETNS: '/var/run/netns/vpc-lease-fuzz-absent',
    CNI_IFNAME: 'eth0',
    CNI_PATH: '/usr/lib/cni',
  };
}

const command = fc.constantFrom('ADD', 'DEL', 'CHECK');
const notJsonObject = fc.oneof(
  fc.string().filter((s) => {
    try {
      const v = JSON.parse(s) as unknown;
      return v === null || typeof v !== 'object' || Array.isArray(v);
    } catch {
      return true;
    }
  }),
  fc
    .jsonValue()
    .filter((v) => v === null || typeof v !== 'object' || Array.isArray(v))
    .map((v) => JSON.stringify(v)),
);

const cases: fc.Arbitrary<FuzzCase> = fc.oneof(
  fc.tuple(command, notJsonObject).map(([cmd, stdin]) => ({
    what: 'stdin is not a JSON object',
    env: baseEnv(cmd),
    stdin,
    code: CniCode.decodeFailure,
  })),
  fc
    .tuple(
      command,
      fc
        .oneof(fc.string(), fc.constantFrom('0.1.0', '0.2.0', '2.0.0', '1.0', ''))
        .filter((v) => !['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'].includes(v)),
    )
    .map(([cmd, cniVersion]) => ({
      what: `unsupported cniVersion ${JSON.stringify(cniVersion)}`,
      env: baseEnv(cmd),
      stdin: JSON.stringify({ ...baseConf(), cniVersion }),
      code: CniCode.incompatibleVersion,
    })),
  fc
    .tuple(fc.constantFrom('CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME', 'CNI_PATH'), fc.constantFrom('ADD', 'CHECK'))
    .map(([name, cmd]) => ({
      what: `${cmd} without ${name}`,
      env: { ...baseEnv(cmd), [name]: undefined },
      stdin: JSON.stringify(baseConf()),
      code: CniCode.invalidEnvironment,
    })),
  fc
    .tuple(
      command,
      fc.oneof(
        fc.string({ minLength: 16, maxLength: 40 }).filter((s) => !/[/:\s]/.test(s) && s.length > 0),
        fc.string({ maxLength: 6 }).map((s) => `${s}/x`),
        fc.constantFrom('.', '..', 'eth 0', 'eth:0'),
      ),
    )
    .map(([cmd, ifName]) => ({
      what: `invalid CNI_IFNAME ${JSON.stringify(ifName)}`,
      env: { ...baseEnv(cmd), CNI_IFNAME: ifName },
      stdin: JSON.stringify(baseConf()),
      code: CniCode.invalidEnvironment,
    })),
  fc
    .tuple(
      command,
      fc
        .string({ minLength: 1, maxLength: 20 })
        .filter((s) => !/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(s) && !s.includes('\0')),
    )
    .map(([cmd, id]) => ({
      what: `invalid CNI_CONTAINERID ${JSON.stringify(id)}`,
      env: { ...baseEnv(cmd), CNI_CONTAINERID: id },
      stdin: JSON.stringify(baseConf()),
      code: CniCode.invalidEnvironment,
    })),
  fc
    .string({ minLength: 1, maxLength: 12 })
    .filter((s) => !['ADD', 'DEL', 'CHECK', 'GC', 'STATUS', 'VERSION'].includes(s) && !s.includes('\0'))
    .map((cmd) => ({
      what: `unknown CNI_COMMAND ${JSON.stringify(cmd)}`,
      env: baseEnv(cmd),
      stdin: JSON.stringify(baseConf()),
      code: CniCode.invalidEnvironment,
    })),
  fc
    .tuple(
      command,
      fc
        .string({ minLength: 1, maxLength: 10 })
        .filter((s) => !s.includes('=') && !s.includes(';') && !s.includes('\0')),
    )
    .map(([cmd, pair]) => ({
      what: `malformed CNI_ARGS ${JSON.stringify(pair)}`,
      env: { ...baseEnv(cmd), CNI_ARGS: pair },
      stdin: JSON.stringify(baseConf()),
      code: CniCode.invalidEnvironment,
    })),
  fc
    .tuple(
      command,
      fc.oneof(
        fc.record({ mtu: fc.oneof(fc.integer({ min: 9217 }), fc.integer({ max: -1 }), fc.string()) }),
        fc.record({ mode: fc.string().filter((m) => !['l2', 'l3', 'l3s'].includes(m)) }),
        fc.record({ reuseWaitMs: fc.oneof(fc.integer({ max: -1 }), fc.constant('30s')) }),
        fc.record({ tableName: fc.string({ maxLength: 2 }) }),
        fc.record({ dataDir: fc.string().filter((d) => !d.startsWith('/')) }),
        fc.record({ logLevel: fc.string().filter((l) => !['debug', 'info', 'warn', 'error'].includes(l)) }),
      ),
    )
    .map(([cmd, broken]) => ({
      what: `invalid netconf ${JSON.stringify(broken)}`,
      env: baseEnv(cmd),
      stdin: JSON.stringify({ ...baseConf(), ...broken }),
      code: CniCode.invalidConfig,
    })),
);

function journalEntries(): string[] {
  if (!existsSync(dataDir())) return [];
  return readdirSync(dataDir(), { recursive: true }).map(String).sort();
}

describe('Property: CNI stdin/env fuzz', () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'vpc-lease-fuzz-'));
    cni = await buildCni(join(dir, 'bin'));
    dynalite = await startDynalite();
    imds = await startFakeImds('i-0f0f0f0f0f0f0f0f0');
    arn = instanceArn('us-east-1', '123456789012', imds.instanceId, 'aws');
    tableName = 'vpc-lease-fuzz';
    const credentials = { accessKeyId: 'test', secretAccessKey: 'test' };
    const ddb = new DynamoDBClient({ endpoint: dynalite.endpoint, region: 'us-east-1', credentials });
    await ddb.send(new CreateTableCommand(createTableInput(tableName)));
    ddb.destroy();
    store = new DynamoLeaseStore({
      api: createSdkDynamoApi({ endpoint: dynalite.endpoint, region: 'us-east-1', credentials }),
      tableName,
    });
    await store.putLeases(
      ['10.9.0.10', '10.9.0.11'].map((ip) => newLease(arn, ip)),
      Date.now() - 1000,
    );
  }, 120_000);

  afterAll(async () => {
    await imds?.close();
    await dynalite?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('answers every broken input with its CNI error code, no crash, and no change', async () => {
    const journalBefore = journalEntries();
    await fc.assert(
      fc.asyncProperty(cases, async (c) => {
        const env: Record<string, string> = {};
        for (const [k, v] of Object.entries(c.env)) if (v !== undefined) env[k] = v;
        const run = await runProcess(cni, [], env, c.stdin);
        expect(run.code, `${c.what}: exit code`).toBe(1);
        expect(run.json?.['code'], `${c.what}: ${run.stdout}`).toBe(c.code);
        expect(typeof run.json?.['msg']).toBe('string');
        expect(run.stderr, c.what).not.toMatch(/\n\s+at /); // no stack trace: a handled error, not a crash
        const leases = await store.listLeases(arn);
        expect(leases.map((l) => l.state)).toEqual(['FREE', 'FREE']);
        expect(journalEntries()).toEqual(journalBefore);
      }),
      { numRuns: Number(process.env['VPC_LEASE_FUZZ_RUNS'] ?? 40), seed: 20261130 },
    );
    // Nothing reached the instance's identity: every case was refused before any I/O.
    expect(imds.requests).toEqual([]);
  }, 120_000);
});
