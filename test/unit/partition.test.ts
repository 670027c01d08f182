import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadIdentity } from '../../node/identity/identity.js';
import { ImdsError } from '../../node/identity/imds.js';
import { instanceArn, parseInstanceArn } from '../../shared/domain/arn.js';
import { dnsSuffixOfRegion, PARTITIONS, partitionOfRegion } from '../../shared/domain/partition.js';
import { defaultDynamoEndpoint } from '../../shared/dynamo/light-client.js';
import { startFakeImds } from '../node/support/fake-imds.js';

interface SdkPartitions {
  readonly partitions: readonly {
    readonly id: string;
    readonly outputs: { readonly dnsSuffix: string };
    readonly regions: Readonly<Record<string, unknown>>;
  }[];
}

/** The SDK's copy of partitions.json (not among @aws-sdk/core's exports, so loaded by its file). */
async function sdkPartitions(): Promise<SdkPartitions> {
  const core = createRequire(import.meta.url).resolve('@aws-sdk/core/package.json');
  const file = join(core, '..', 'dist-es/submodules/client/util-endpoints/lib/aws/partitions.js');
  return ((await import(pathToFileURL(file).href)) as { partitionsInfo: SdkPartitions }).partitionsInfo;
}

describe('Function: partitionOfRegion', () => {
  it.each([
    ['us-east-1', 'aws'],
    ['ap-southeast-7', 'aws'],
    ['mx-central-1', 'aws'],
    ['cn-north-1', 'aws-cn'],
    ['cn-northwest-1', 'aws-cn'],
    ['us-gov-west-1', 'aws-us-gov'],
    ['us-gov-east-1', 'aws-us-gov'],
    ['us-iso-east-1', 'aws-iso'],
    ['us-isob-east-1', 'aws-iso-b'],
    ['eu-isoe-west-1', 'aws-iso-e'],
    ['us-isof-south-1', 'aws-iso-f'],
    ['eusc-de-east-1', 'aws-eusc'],
  ])('puts %s in %s', (region, partition) => {
    expect(partitionOfRegion(region)?.id).toBe(partition);
  });

  it('takes no name that is not a Region (negative control)', () => {
    for (const bad of ['', 'us-east', 'cn-north', 'xx-east-1', 'us-gov-west-1a', 'local']) {
      expect(partitionOfRegion(bad)).toBeUndefined();
    }
  });

  it('agrees with the AWS SDK’s partitions.json on every partition, Region and DNS suffix', async () => {
    const sdk = (await sdkPartitions()).partitions;
    expect(PARTITIONS.map((p) => p.id).sort()).toEqual(sdk.map((p) => p.id).sort());
    for (const p of sdk) {
      const ours = PARTITIONS.find((o) => o.id === p.id)!;
      expect(ours.dnsSuffix).toBe(p.outputs.dnsSuffix);
      for (const region of Object.keys(p.regions).filter((r) => !r.endsWith('-global'))) {
        expect(partitionOfRegion(region)?.id, region).toBe(p.id);
      }
    }
  });

  it('gives the Region’s DNS suffix to the DynamoDB endpoint', () => {
    expect(dnsSuffixOfRegion('cn-northwest-1')).toBe('amazonaws.com.cn');
    expect(defaultDynamoEndpoint('cn-north-1')).toBe('https://dynamodb.cn-north-1.amazonaws.com.cn');
    expect(defaultDynamoEndpoint('us-gov-west-1')).toBe('https://dynamodb.us-gov-west-1.amazonaws.com');
    expect(defaultDynamoEndpoint('us-isob-east-1')).toBe('https://dynamodb.us-isob-east-1.sc2s.sgov.gov');
  });
});

describe('Function: instanceArn', () => {
  it('builds and parses the ARN of every partition', () => {
    const arn = instanceArn('us-isob-east-1', '123456789012', 'i-0123456789abcdef0', 'aws-iso-b');
    expect(arn).toBe('arn:aws-iso-b:ec2:us-isob-east-1:123456789012:instance/i-0123456789abcdef0');
    expect(parseInstanceArn(arn).partition).toBe('aws-iso-b');
    expect(instanceArn('eusc-de-east-1', '123456789012', 'i-0123456789abcdef0', 'aws-eusc')).toMatch(/^arn:aws-eusc:/);
  });

  it('refuses a partition that does not exist', () => {
    expect(() => instanceArn('us-east-1', '123456789012', 'i-0123456789abcdef0', 'aws-moon')).toThrow(/partition/);
  });
});

describe('Function: loadIdentity (partition)', () => {
  async function identityFrom(region: string, partition?: string) {
    const imds = await startFakeImds('i-0123456789abcdef0', region, '210987654321', undefined, partition);
    const dir = mkdtempSync(join(tmpdir(), 'vpc-lease-partition-'));
    try {
      const id = await loadIdentity({
        dataDir: dir,
        ttlS: 60,
        timeoutMs: 1000,
        endpoint: imds.endpoint,
        env: {},
        nowMs: Date.now(),
      });
      return { id, requests: [...imds.requests] };
    } finally {
      await imds.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }

  it('takes the partition IMDS answers', async () => {
    // A Region whose name says aws, and an IMDS that says otherwise: the IMDS answer is the one used.
    const { id, requests } = await identityFrom('us-east-1', 'aws-us-gov');
    expect(id.partition).toBe('aws-us-gov');
    expect(id.instanceArn).toBe('arn:aws-us-gov:ec2:us-east-1:210987654321:instance/i-0123456789abcdef0');
    expect(requests).toContain('GET /latest/meta-data/services/partition');
  });

  it('derives it from the Region when IMDS has no services/partition', async () => {
    const cn = await identityFrom('cn-northwest-1');
    expect(cn.requests).toContain('GET /latest/meta-data/services/partition');
    expect(cn.id.instanceArn).toBe('arn:aws-cn:ec2:cn-northwest-1:210987654321:instance/i-0123456789abcdef0');
    expect((await identityFrom('us-gov-east-1')).id.partition).toBe('aws-us-gov');
  });

  it('fails clearly when neither IMDS nor the Region tells it', async () => {
    await expect(identityFrom('zz-nowhere-1')).rejects.toThrow(ImdsError);
    await expect(identityFrom('us-east-1', 'aws-moon')).rejects.toThrow(/partition/);
  });
});
