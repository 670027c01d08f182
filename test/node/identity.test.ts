import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createScheduler } from '../../local-cloud/events/scheduler.js';
import { ImdsService } from '../../local-cloud/imds/service.js';
import type { Ec2SimulatorApi, SimInstance } from '../../local-cloud/ports.js';
import { loadIdentity } from '../../node/identity/identity.js';
import { ImdsError } from '../../node/identity/imds.js';
import { type FakeImds, startFakeImds } from './support/fake-imds.js';

describe('loadIdentity', () => {
  let imds: FakeImds;
  let dir: string;
  beforeAll(async () => {
    imds = await startFakeImds('i-0123456789abcdef0', 'eu-west-1', '210987654321');
    dir = mkdtempSync(join(tmpdir(), 'vpc-lease-identity-'));
  });
  afterAll(async () => {
    await imds.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const options = (nowMs: number, extra: Partial<Parameters<typeof loadIdentity>[0]> = {}) => ({
    dataDir: dir,
    ttlS: 60,
    timeoutMs: 1000,
    endpoint: imds.endpoint,
    env: {},
    nowMs,
    ...extra,
  });

  it('reads IMDSv2 once, then serves the ARN and credentials from a 0600 cache until the TTL passes', async () => {
    imds.requests.length = 0;
    const t0 = Date.now();
    const first = await loadIdentity(options(t0));
    expect(first.source).toBe('imds');
    expect(first.instanceArn).toBe('arn:aws:ec2:eu-west-1:210987654321:instance/i-0123456789abcdef0');
    expect(first.credentials).toMatchObject({ accessKeyId: 'AKIDNODE', sessionToken: 'session' });
    expect(imds.requests[0]).toBe('PUT /latest/api/token');
    const afterFirst = imds.requests.length;
    const second = await loadIdentity(options(t0 + 59_000));
    expect(second.source).toBe('cache');
    expect(second.credentials.accessKeyId).toBe('AKIDNODE');
    expect(imds.requests.length).toBe(afterFirst);
    expect(statSync(join(dir, 'identity.json')).mode & 0o777).toBe(0o600);
    const third = await loadIdentity(options(t0 + 61_000));
    expect(third.source).toBe('imds');
    expect(imds.requests.length).toBeGreaterThan(afterFirst);
  });

  it('uses environment credentials instead of the role when they are set', async () => {
    imds.requests.length = 0;
    const id = await loadIdentity(
      options(Date.now() + 10 * 60_000, { env: { AWS_ACCESS_KEY_ID: 'ENVKEY', AWS_SECRET_ACCESS_KEY: 's' } }),
    );
    expect(id.credentials.accessKeyId).toBe('ENVKEY');
    expect(imds.requests.some((r) => r.includes('security-credentials'))).toBe(false);
  });

  it('fails with ImdsError when IMDS answers errors and nothing fresh is cached', async () => {
    imds.failing = true;
    try {
      await expect(loadIdentity(options(Date.now() + 3600_000))).rejects.toBeInstanceOf(ImdsError);
    } finally {
      imds.failing = false;
    }
  });
});

describe('loadIdentity against the local cloud', () => {
  it('reads the identity and role credentials from local-cloud IMDS for a simulated instance', async () => {
    const instance: SimInstance = {
      instanceId: 'i-0aaaabbbbccccdddd',
      instanceType: 'm5.large',
      state: 'running',
      availabilityZone: 'us-west-2a',
      region: 'us-west-2',
      accountId: '111122223333',
      vpcId: 'vpc-01234567',
      subnetId: 'subnet-01234567',
      imageId: 'ami-01234567',
      privateIpAddress: '10.0.0.10',
      launchTimeMs: Date.now() - 60_000,
      tags: {},
    };
    // Only what IMDS reads of the EC2 simulator: the instance and its interfaces.
    const ec2 = {
      region: 'us-west-2',
      accountId: '111122223333',
      getInstance: (id: string) => (id === instance.instanceId ? instance : undefined),
      instanceInterfaces: () => [],
    } as unknown as Ec2SimulatorApi;
    const scheduler = createScheduler();
    const service = new ImdsService({ ec2, scheduler });
    const dir = mkdtempSync(join(tmpdir(), 'vpc-lease-identity-local-'));
    try {
      const id = await loadIdentity({
        dataDir: dir,
        ttlS: 60,
        timeoutMs: 2000,
        endpoint: await service.endpointFor(instance.instanceId),
        env: {},
        nowMs: Date.now(),
      });
      expect(id.instanceArn).toBe('arn:aws:ec2:us-west-2:111122223333:instance/i-0aaaabbbbccccdddd');
      expect(id.credentials.accessKeyId).toMatch(/\S+/);
      expect(id.credentials.sessionToken).toBeDefined();
    } finally {
      await service.close();
      scheduler.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
