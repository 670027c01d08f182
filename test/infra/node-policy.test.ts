import { runSimulation } from '@cloud-copilot/iam-simulate';
import { Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { createNodePolicy } from '../../infra/construct/node-policy.js';
import { instanceArn } from '../../shared/domain/arn.js';
import { A, HOLDER_ATTRS, HOLDER_NETWORK_ATTR } from '../../shared/lease-store/item-codec.js';
import { CLAIMABLE_INDEX } from '../../shared/lease-store/table.js';
import { TEST_ENV, TEST_VPC_ID } from './support/stacks.js';

/**
 * The node policy's per-verb requests (docs/DEPLOY.md, "The node role policy") evaluated by a maintained IAM
 * evaluator, @cloud-copilot/iam-simulate: each request the plugin makes is allowed, and each variant an
 * attacker would need — another attribute, another partition, another action — is not.
 */
const { account, region } = TEST_ENV;
const TABLE_ARN = `arn:aws:dynamodb:${region}:${account}:table/prod-1-leases-v2`;
const INDEX_ARN = `${TABLE_ARN}/index/${CLAIMABLE_INDEX.name}`;
const OWN = instanceArn(region, account, 'i-0123456789abcdef0', 'aws');
const OTHER = instanceArn(region, account, 'i-0fedcba9876543210', 'aws');

type Context = Record<string, string | string[] | undefined>;

let policy: unknown;
beforeAll(() => {
  const stack = new Stack(undefined, 'NodePolicy', { env: TEST_ENV });
  createNodePolicy(stack, 'Policy', { tableArn: TABLE_ARN, vpcId: TEST_VPC_ID, clusterName: 'prod-1' });
  const [resource] = Object.values(Template.fromStack(stack).findResources('AWS::IAM::ManagedPolicy'));
  policy = resource?.Properties.PolicyDocument;
});

async function allowed(action: string, resource: string, context: Context): Promise<boolean> {
  const defined = Object.fromEntries(Object.entries(context).filter(([, v]) => v !== undefined)) as Record<
    string,
    string | string[]
  >;
  const response = await runSimulation(
    {
      identityPolicies: [{ name: 'node', policy: policy as never }],
      serviceControlPolicies: [],
      resourceControlPolicies: [],
      request: {
        principal: `arn:aws:sts::${account}:assumed-role/node-role/i-0123456789abcdef0`,
        action,
        resource: { resource, accountId: account },
        contextVariables: defined,
      },
    } as never,
    {},
  );
  if (response.resultType === 'error') throw new Error(`simulation refused: ${JSON.stringify(response.errors)}`);
  return response.overallResult === 'Allowed';
}

const base = (keys: string[] = [OWN]): Context => ({
  'ec2:SourceInstanceARN': OWN,
  'dynamodb:LeadingKeys': keys,
  'aws:SourceVpc': TEST_VPC_ID,
});

const CLAIM_ATTRS = [A.pk, A.sk, A.state, A.claimedAt, A.version, ...HOLDER_ATTRS, HOLDER_NETWORK_ATTR, A.cAt];
const RELEASE_ATTRS = [A.pk, A.sk, A.state, A.releasedAt, A.cAt, A.version, ...HOLDER_ATTRS, HOLDER_NETWORK_ATTR];
const update = (attrs: string[], returnValues: string | undefined = 'ALL_NEW', keys = [OWN]): Context => ({
  ...base(keys),
  'dynamodb:Attributes': attrs,
  'dynamodb:ReturnValues': returnValues,
});

describe('Policy: the node policy under iam-simulate', () => {
  it('allows every request of the DEPLOY.md table (positive controls)', async () => {
    const requests: [string, string, Context][] = [
      ['dynamodb:GetItem', TABLE_ARN, base()],
      ['dynamodb:Query', TABLE_ARN, base()],
      ['dynamodb:Query', TABLE_ARN, { ...base(), 'dynamodb:Select': 'ALL_ATTRIBUTES' }],
      ['dynamodb:Query', INDEX_ARN, { ...base(), 'dynamodb:Select': 'SPECIFIC_ATTRIBUTES' }],
      ['dynamodb:Query', INDEX_ARN, { ...base(), 'dynamodb:Select': 'COUNT' }],
      ['dynamodb:UpdateItem', TABLE_ARN, update(CLAIM_ATTRS)],
      ['dynamodb:UpdateItem', TABLE_ARN, update(RELEASE_ATTRS)],
      ['dynamodb:UpdateItem', TABLE_ARN, update(RELEASE_ATTRS, undefined)],
    ];
    for (const [action, resource, context] of requests)
      expect({ action, context, allowed: await allowed(action, resource, context) }).toMatchObject({ allowed: true });
  });

  it('denies writing any attribute a claim or a release does not change', async () => {
    // ENI, MAC, subnet, prefix and creation time of a lease; the node item's version, phase and ENI list; the
    // old global index key; the node index's key.
    for (const attr of [A.eniId, A.mac, A.subnetId, A.subnetCidr, A.gateway, A.prefix, A.createdAt, A.deviceIndex]) {
      expect(await allowed('dynamodb:UpdateItem', TABLE_ARN, update([...RELEASE_ATTRS, attr]))).toBe(false);
    }
    for (const attr of [A.nodeVersion, A.phase, A.enis, A.instanceId, A.lifecycle, 'cPk', A.nodeShard]) {
      expect(await allowed('dynamodb:UpdateItem', TABLE_ARN, update([A.pk, A.sk, attr]))).toBe(false);
    }
  });

  it('denies an UpdateItem that does not say which attributes it names', async () => {
    // (An empty list cannot occur: an UpdateItem always names its key attributes.)
    expect(await allowed('dynamodb:UpdateItem', TABLE_ARN, { ...base() })).toBe(false);
  });

  it('denies another partition, alone or among its own, for reads and writes', async () => {
    for (const keys of [[OTHER], [OWN, OTHER]]) {
      expect(await allowed('dynamodb:GetItem', TABLE_ARN, base(keys))).toBe(false);
      expect(await allowed('dynamodb:Query', INDEX_ARN, base(keys))).toBe(false);
      expect(await allowed('dynamodb:UpdateItem', TABLE_ARN, update(RELEASE_ATTRS, 'ALL_NEW', keys))).toBe(false);
    }
  });

  it('denies PutItem, DeleteItem, batch calls, Scan and PartiQL even on its own partition', async () => {
    for (const action of [
      'dynamodb:PutItem',
      'dynamodb:DeleteItem',
      'dynamodb:BatchWriteItem',
      'dynamodb:BatchGetItem',
      'dynamodb:Scan',
      'dynamodb:PartiQLUpdate',
      'dynamodb:PartiQLInsert',
    ]) {
      expect(await allowed(action, TABLE_ARN, update(RELEASE_ATTRS))).toBe(false);
    }
  });

  it('denies writes through the index, other Select and ReturnValues values, and calls from outside the VPC', async () => {
    expect(await allowed('dynamodb:UpdateItem', INDEX_ARN, update(RELEASE_ATTRS))).toBe(false);
    expect(
      await allowed('dynamodb:Query', INDEX_ARN, { ...base(), 'dynamodb:Select': 'ALL_PROJECTED_ATTRIBUTES' }),
    ).toBe(false);
    for (const rv of ['ALL_OLD', 'UPDATED_OLD', 'UPDATED_NEW'])
      expect(await allowed('dynamodb:UpdateItem', TABLE_ARN, update(RELEASE_ATTRS, rv))).toBe(false);
    expect(await allowed('dynamodb:GetItem', TABLE_ARN, { ...base(), 'aws:SourceVpc': 'vpc-0fffffffffffffff0' })).toBe(
      false,
    );
    expect(await allowed('dynamodb:GetItem', TABLE_ARN, { ...base(), 'ec2:SourceInstanceARN': undefined })).toBe(false);
  });
});
