import {
  AssignPrivateIpAddressesCommand,
  AttachNetworkInterfaceCommand,
  CreateNetworkInterfaceCommand,
  DetachNetworkInterfaceCommand,
  EC2Client,
} from '@aws-sdk/client-ec2';
import { fromInstanceMetadata } from '@smithy/credential-provider-imds';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Ec2SimulatorServer } from '../../local-cloud/ec2/index.js';
import { startEc2Simulator } from '../../local-cloud/ec2/index.js';
import type { SimScheduler } from '../../local-cloud/events/scheduler.js';
import { createScheduler } from '../../local-cloud/events/scheduler.js';
import { ImdsService, UnknownInstanceError } from '../../local-cloud/imds/service.js';
import type { SimInstance } from '../../local-cloud/ports.js';
import { ManualClock } from '../../shared/clock.js';
import { ACCOUNT, eventually, LOCAL_CREDENTIALS, REGION } from './helpers.js';

describe('IMDSv2 of a simulated instance', () => {
  let scheduler: SimScheduler;
  let ec2Sim: Ec2SimulatorServer;
  let ec2: EC2Client;
  let imds: ImdsService;
  let instance: SimInstance;
  let base: string;
  let subnetId: string;

  // The maximum TTL: 6 simulated hours are 216 real seconds at this scale, so no token expires mid-test.
  const token = async (ttlS = 21_600): Promise<string> => {
    const res = await fetch(`${base}/latest/api/token`, {
      method: 'PUT',
      headers: { 'X-aws-ec2-metadata-token-ttl-seconds': String(ttlS) },
    });
    expect(res.status).toBe(200);
    return res.text();
  };
  const get = async (path: string, t?: string): Promise<{ status: number; body: string }> => {
    const res = await fetch(`${base}${path}`, { headers: t ? { 'X-aws-ec2-metadata-token': t } : {} });
    return { status: res.status, body: await res.text() };
  };

  beforeAll(async () => {
    scheduler = createScheduler({ timeScale: 0.01 });
    ec2Sim = await startEc2Simulator({ region: REGION, accountId: ACCOUNT, seed: 3 });
    const vpc = ec2Sim.admin.seedVpc('10.1.0.0/16');
    subnetId = ec2Sim.admin.seedSubnet(vpc.vpcId, '10.1.4.0/22', 'us-east-1c').subnetId;
    instance = ec2Sim.api.launchInstance({ instanceType: 'm5.large', subnetId });
    imds = new ImdsService({ ec2: ec2Sim.api, scheduler });
    base = await imds.endpointFor(instance.instanceId);
    ec2 = new EC2Client({ endpoint: ec2Sim.endpoint, region: REGION, credentials: LOCAL_CREDENTIALS, maxAttempts: 1 });
  });
  afterAll(async () => {
    ec2.destroy();
    await imds.close();
    await ec2Sim.close();
    scheduler.close();
  });

  it('answers 401 without a token and with a made-up token', async () => {
    expect((await get('/latest/meta-data/instance-id')).status).toBe(401);
    expect((await get('/latest/meta-data/instance-id', 'AQAEAbogus')).status).toBe(401);
  });

  it('expires a token after its TTL of simulated time', async () => {
    // A hand-moved clock: expiry is checked against the scheduler's clock, so no sleeping and no race.
    const clock = new ManualClock(Date.now());
    const manual = createScheduler({ timeScale: 0.01, clock });
    const own = new ImdsService({ ec2: ec2Sim.api, scheduler: manual });
    try {
      const url = await own.endpointFor(instance.instanceId);
      const issued = await fetch(`${url}/latest/api/token`, {
        method: 'PUT',
        headers: { 'X-aws-ec2-metadata-token-ttl-seconds': '60' },
      });
      expect(issued.headers.get('x-aws-ec2-metadata-token-ttl-seconds')).toBe('60');
      const t = await issued.text();
      const read = async (): Promise<Response> =>
        fetch(`${url}/latest/meta-data/instance-id`, { headers: { 'X-aws-ec2-metadata-token': t } });
      clock.advance(manual.realMs(59_000));
      const valid = await read();
      expect(valid.status).toBe(200);
      expect(valid.headers.get('x-aws-ec2-metadata-token-ttl-seconds')).toBe('1');
      clock.advance(manual.realMs(1_000));
      expect((await read()).status).toBe(401);
    } finally {
      await own.close();
      manual.close();
    }
  });

  it('refuses token requests without a valid TTL or through a proxy', async () => {
    const noTtl = await fetch(`${base}/latest/api/token`, { method: 'PUT' });
    expect(noTtl.status).toBe(400);
    const tooLong = await fetch(`${base}/latest/api/token`, {
      method: 'PUT',
      headers: { 'X-aws-ec2-metadata-token-ttl-seconds': '21601' },
    });
    expect(tooLong.status).toBe(400);
    const proxied = await fetch(`${base}/latest/api/token`, {
      method: 'PUT',
      headers: { 'X-aws-ec2-metadata-token-ttl-seconds': '60', 'X-Forwarded-For': '10.0.0.1' },
    });
    expect(proxied.status).toBe(403);
  });

  it('serves the identity document and the instance keys of its own instance', async () => {
    const t = await token();
    const doc = JSON.parse((await get('/latest/dynamic/instance-identity/document', t)).body) as Record<
      string,
      unknown
    >;
    expect(doc).toMatchObject({
      instanceId: instance.instanceId,
      instanceType: 'm5.large',
      region: REGION,
      accountId: ACCOUNT,
      availabilityZone: 'us-east-1c',
      privateIp: instance.privateIpAddress,
      imageId: instance.imageId,
    });
    expect((await get('/latest/meta-data/instance-id', t)).body).toBe(instance.instanceId);
    expect((await get('/latest/meta-data/local-ipv4', t)).body).toBe(instance.privateIpAddress);
    expect((await get('/latest/meta-data/placement/availability-zone', t)).body).toBe('us-east-1c');
    const boot = ec2Sim.api.instanceInterfaces(instance.instanceId).find((i) => i.deviceIndex === 0)!;
    expect((await get('/latest/meta-data/mac', t)).body).toBe(boot.mac);
    expect((await get('/latest/meta-data/no-such-key', t)).status).toBe(404);
    expect((await get('/latest/meta-data/', t)).body.split('\n')).toEqual(
      expect.arrayContaining(['instance-id', 'mac', 'network/', 'iam/', 'placement/']),
    );
  });

  it('reflects an attached ENI and its secondary addresses under network/interfaces/macs as they change', async () => {
    const t = await token();
    const before = (await get('/latest/meta-data/network/interfaces/macs/', t)).body.split('\n');
    expect(before).toHaveLength(1);
    const eni = await ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: subnetId }));
    const eniId = eni.NetworkInterface!.NetworkInterfaceId!;
    const mac = eni.NetworkInterface!.MacAddress!;
    const attach = await ec2.send(
      new AttachNetworkInterfaceCommand({ NetworkInterfaceId: eniId, InstanceId: instance.instanceId, DeviceIndex: 1 }),
    );
    await eventually(
      async () => (await get('/latest/meta-data/network/interfaces/macs/', t)).body.includes(`${mac}/`),
      {
        what: 'the attached ENI in IMDS',
      },
    );
    const assigned = await ec2.send(
      new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: eniId, SecondaryPrivateIpAddressCount: 2 }),
    );
    const secondaries = assigned.AssignedPrivateIpAddresses!.map((a) => a.PrivateIpAddress!);
    const key = (k: string) => get(`/latest/meta-data/network/interfaces/macs/${mac}/${k}`, t).then((r) => r.body);
    expect(await key('device-number')).toBe('1');
    expect(await key('interface-id')).toBe(eniId);
    expect(await key('subnet-id')).toBe(subnetId);
    expect(await key('subnet-ipv4-cidr-block')).toBe('10.1.4.0/22');
    expect(await key('vpc-ipv4-cidr-blocks')).toBe('10.1.0.0/16');
    expect((await key('local-ipv4s')).split('\n')).toEqual([eni.NetworkInterface!.PrivateIpAddress, ...secondaries]);
    expect((await get(`/latest/meta-data/network/interfaces/macs/${mac}/ipv4-prefix`, t)).status).toBe(404);
    const delegated = await ec2.send(
      new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: eniId, Ipv4PrefixCount: 1 }),
    );
    const prefix = delegated.AssignedIpv4Prefixes![0]!.Ipv4Prefix!;
    expect(prefix).toMatch(/\/28$/);
    expect(await key('ipv4-prefix')).toBe(prefix);
    await ec2.send(new DetachNetworkInterfaceCommand({ AttachmentId: attach.AttachmentId! }));
    await eventually(async () => !(await get('/latest/meta-data/network/interfaces/macs/', t)).body.includes(mac), {
      what: 'the detached ENI gone from IMDS',
    });
  });

  it('hands out role credentials the AWS SDK IMDS provider accepts', async () => {
    const t = await token();
    expect((await get('/latest/meta-data/iam/security-credentials/', t)).body).toBe('vpc-lease-node');
    process.env['AWS_EC2_METADATA_SERVICE_ENDPOINT'] = base;
    try {
      const credentials = await fromInstanceMetadata({ maxRetries: 0, timeout: 2000 })();
      expect(credentials).toMatchObject({
        accessKeyId: 'ASIALOCALCLOUDNODE00',
        sessionToken: 'local-cloud-node-session-token',
      });
      expect(credentials.expiration!.getTime()).toBeGreaterThan(Date.now());
    } finally {
      delete process.env['AWS_EC2_METADATA_SERVICE_ENDPOINT'];
    }
  });

  it('hands each instance its own session when one is issued per instance, the same on every read', async () => {
    const issued = new Map<string, { accessKeyId: string; secretAccessKey: string; sessionToken: string }>();
    const own = new ImdsService({
      ec2: ec2Sim.api,
      scheduler,
      sessionFor: (i) => {
        let s = issued.get(i.instanceId);
        if (!s) {
          s = { accessKeyId: `ASIA${i.instanceId}`, secretAccessKey: 'secret', sessionToken: `token-${i.instanceId}` };
          issued.set(i.instanceId, s);
        }
        return s;
      },
    });
    try {
      const other = ec2Sim.api.launchInstance({ instanceType: 't3.medium', subnetId });
      const read = async (instanceId: string): Promise<string> => {
        process.env['AWS_EC2_METADATA_SERVICE_ENDPOINT'] = await own.endpointFor(instanceId);
        return (await fromInstanceMetadata({ maxRetries: 0, timeout: 2000 })()).accessKeyId;
      };
      const first = await read(instance.instanceId);
      expect(first).toBe(`ASIA${instance.instanceId}`);
      expect(await read(other.instanceId)).toBe(`ASIA${other.instanceId}`);
      expect(await read(instance.instanceId)).toBe(first);
      // Negative control: without the issuer every instance gets the one fixed role's keys.
      expect((await get('/latest/meta-data/iam/security-credentials/vpc-lease-node', await token())).body).toContain(
        'ASIALOCALCLOUDNODE00',
      );
    } finally {
      delete process.env['AWS_EC2_METADATA_SERVICE_ENDPOINT'];
      await own.close();
    }
  });

  it('gives each instance its own endpoint and refuses unknown instances', async () => {
    const other = ec2Sim.api.launchInstance({ instanceType: 't3.medium', subnetId });
    const otherBase = await imds.endpointFor(other.instanceId);
    expect(otherBase).not.toBe(base);
    expect(await imds.endpointFor(instance.instanceId)).toBe(base);
    const t = await (
      await fetch(`${otherBase}/latest/api/token`, {
        method: 'PUT',
        headers: { 'X-aws-ec2-metadata-token-ttl-seconds': '21600' },
      })
    ).text();
    const res = await fetch(`${otherBase}/latest/meta-data/instance-id`, {
      headers: { 'X-aws-ec2-metadata-token': t },
    });
    expect(await res.text()).toBe(other.instanceId);
    // Tokens are per instance: one instance's token is worthless at another's endpoint.
    expect((await get('/latest/meta-data/instance-id', t)).status).toBe(401);
    await expect(imds.endpointFor('i-0000000000000dead')).rejects.toBeInstanceOf(UnknownInstanceError);
  });
});
