import type { Template } from 'aws-cdk-lib/assertions';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { CLUSTER_TAG_KEY } from '../../infra/construct/eni-tags.js';
import { NODE_TABLE_ACTIONS, NODE_WRITE_ACTIONS } from '../../infra/construct/node-policy.js';
import { evaluate } from '../../local-cloud/iam/evaluate.js';
import { concretize } from '../../local-cloud/iam/intrinsics.js';
import type { PolicyDocument } from '../../local-cloud/iam/node-policy.js';
import { instanceArn } from '../../shared/domain/arn.js';
import { CLAIMABLE_INDEX } from '../../shared/lease-store/table.js';
import { GC_MARK_TAG } from '../../shared/reconcile/gc-plan.js';
import { onlyLogicalId, synthAllocator, TEST_ENV, TEST_VPC_ID } from './support/stacks.js';

const { account, region } = TEST_ENV;
const TABLE_NAME = 'prod-1-leases';
const TABLE_ARN = `arn:aws:dynamodb:${region}:${account}:table/${TABLE_NAME}`;
const INDEX_ARN = `${TABLE_ARN}/index/${CLAIMABLE_INDEX.name}`;
const ec2Arn = (kind: string, id: string): string => `arn:aws:ec2:${region}:${account}:${kind}/${id}`;

const instanceIdArb = fc.stringMatching(/^i-[0-9a-f]{17}$/);
const arnOf = (id: string): string => instanceArn(region, account, id, 'aws');
const nodeActionArb = fc.constantFrom(...NODE_TABLE_ACTIONS);
const tableResourceArb = fc.constantFrom(TABLE_ARN, INDEX_ARN);

// Every EC2 action a node might try, plus the DynamoDB calls it must not have.
const EC2_ACTIONS = [
  'ec2:CreateNetworkInterface',
  'ec2:AttachNetworkInterface',
  'ec2:AssignPrivateIpAddresses',
  'ec2:UnassignPrivateIpAddresses',
  'ec2:AssignIpv6Addresses',
  'ec2:UnassignIpv6Addresses',
  'ec2:DeleteNetworkInterface',
  'ec2:ModifyNetworkInterfaceAttribute',
  'ec2:CreateTags',
  'ec2:DescribeInstances',
  'ec2:DescribeNetworkInterfaces',
  'ec2:RunInstances',
];
const FORBIDDEN_DYNAMODB = [
  'dynamodb:Scan',
  'dynamodb:BatchWriteItem',
  'dynamodb:BatchGetItem',
  'dynamodb:DeleteTable',
  'dynamodb:PartiQLSelect',
];

type PolicyJson = PolicyDocument;

interface Request {
  readonly action: string;
  readonly resource: string;
  /** Request context keys; multi-valued keys (dynamodb:LeadingKeys, aws:TagKeys) as arrays; undefined = absent. */
  readonly context: Readonly<Record<string, string | readonly string[] | undefined>>;
}

/** The request judged by @cloud-copilot/iam-simulate (the engine the local cloud enforces with), not by us. */
async function isAllowed(policy: PolicyJson, request: Request): Promise<boolean> {
  const context: Record<string, string | readonly string[]> = {};
  for (const [k, v] of Object.entries(request.context)) if (v !== undefined) context[k] = v;
  const principal = `arn:aws:sts::${account}:assumed-role/vpc-lease-test/session`;
  return (await evaluate([policy], principal, account, { ...request, context })).allowed;
}

function nodeRequest(action: string, resource: string, own: string, keys: readonly string[]): Request {
  // A release's attributes: the node policy allows UpdateItem only with a dynamodb:Attributes list.
  const write = (NODE_WRITE_ACTIONS as readonly string[]).includes(action);
  return {
    action,
    // UpdateItem addresses the table; an index is read-only.
    resource: write ? TABLE_ARN : resource,
    context: {
      'ec2:SourceInstanceARN': own,
      'dynamodb:LeadingKeys': keys,
      'aws:SourceVpc': TEST_VPC_ID,
      ...(write ? { 'dynamodb:Attributes': ['pk', 'sk', 'st', 'v', 'rl', 'cAt', 'hc', 'hi'] } : {}),
    },
  };
}

/** The synthesised policy of a resource, with its intrinsics replaced by the concrete test values. */
function policyOf(template: Template, type: string, match: (props: Record<string, unknown>) => boolean): PolicyJson {
  const tableId = onlyLogicalId(template, 'AWS::DynamoDB::Table');
  const refs = {
    'AWS::Partition': 'aws',
    'AWS::Region': region,
    'AWS::AccountId': account,
    [tableId]: TABLE_NAME,
    [`${tableId}.Arn`]: TABLE_ARN,
    [`${tableId}.StreamArn`]: `${TABLE_ARN}/stream/2026-01-01T00:00:00.000`,
  };
  const found = Object.values(template.findResources(type)).filter((r) => match(r.Properties));
  if (found.length !== 1) throw new Error(`expected one matching ${type}, found ${found.length}`);
  // Other resources' ARNs (queues, log groups) stay as unknown references; replace them with placeholders.
  const doc = JSON.parse(
    JSON.stringify(found[0]!.Properties.PolicyDocument).replace(
      new RegExp(`\\{"Fn::GetAtt":\\["(?!${tableId}")[A-Za-z0-9]+","[A-Za-z]+"\\]\\}`, 'g'),
      '"arn:aws:other:::unrelated"',
    ),
  );
  return concretize(doc, refs) as PolicyJson;
}

// One synthesis for the whole file.
let template: Template;
beforeAll(() => {
  ({ template } = synthAllocator());
});

describe('Policy: node policy (invariant 7)', () => {
  let policy: PolicyJson;

  beforeAll(() => {
    policy = policyOf(template, 'AWS::IAM::ManagedPolicy', () => true);
  });

  it('is one managed policy with exactly the three single-partition actions, no PutItem or DeleteItem', () => {
    template.resourceCountIs('AWS::IAM::ManagedPolicy', 1);
    const actions = policy.Statement.flatMap((s) => [s.Action ?? []].flat() as string[]);
    expect(actions.sort()).toEqual([...NODE_TABLE_ACTIONS].sort());
    expect(actions).not.toContain('dynamodb:PutItem');
    expect(actions).not.toContain('dynamodb:DeleteItem');
  });

  it('allows a node every granted action on its own partition, from its VPC (positive control)', async () => {
    await fc.assert(
      fc.asyncProperty(instanceIdArb, nodeActionArb, tableResourceArb, async (id, action, resource) => {
        expect(await isAllowed(policy, nodeRequest(action, resource, arnOf(id), [arnOf(id)]))).toBe(true);
      }),
    );
  });

  it('denies any request that names another instance’s partition, alone or among its own', async () => {
    await fc.assert(
      fc.asyncProperty(
        instanceIdArb,
        instanceIdArb,
        nodeActionArb,
        tableResourceArb,
        fc.boolean(),
        async (own, other, action, resource, mixed) => {
          fc.pre(own !== other);
          const keys = mixed ? [arnOf(own), arnOf(other)] : [arnOf(other)];
          expect(await isAllowed(policy, nodeRequest(action, resource, arnOf(own), keys))).toBe(false);
        },
      ),
    );
  });

  it('denies requests without partition keys, from outside the VPC, or without instance credentials', async () => {
    await fc.assert(
      fc.asyncProperty(instanceIdArb, nodeActionArb, tableResourceArb, async (id, action, resource) => {
        const own = arnOf(id);
        const base = nodeRequest(action, resource, own, [own]);
        expect(await isAllowed(policy, nodeRequest(action, resource, own, []))).toBe(false);
        expect(
          await isAllowed(policy, { ...base, context: { ...base.context, 'aws:SourceVpc': 'vpc-0fffffffffffffff0' } }),
        ).toBe(false);
        expect(await isAllowed(policy, { ...base, context: { ...base.context, 'aws:SourceVpc': undefined } })).toBe(
          false,
        );
        // Credentials that are not an instance profile's carry no ec2:SourceInstanceARN.
        expect(
          await isAllowed(policy, { ...base, context: { ...base.context, 'ec2:SourceInstanceARN': undefined } }),
        ).toBe(false);
      }),
    );
  });

  it('denies every EC2 call, Scan and the other table-wide DynamoDB calls', async () => {
    await fc.assert(
      fc.asyncProperty(
        instanceIdArb,
        // Each action with the resources it can name (the engine refuses an EC2 action on a table ARN).
        fc.oneof(
          fc.tuple(fc.constantFrom(...EC2_ACTIONS), fc.constant('*')),
          fc.tuple(fc.constantFrom(...FORBIDDEN_DYNAMODB), fc.constantFrom(TABLE_ARN, INDEX_ARN, '*')),
          fc.tuple(
            fc.constantFrom('dynamodb:DescribeStream', 'dynamodb:GetRecords'),
            fc.constant(`${TABLE_ARN}/stream/x`),
          ),
        ),
        async (id, [action, resource]) => {
          expect(await isAllowed(policy, nodeRequest(action, resource, arnOf(id), [arnOf(id)]))).toBe(false);
        },
      ),
    );
  });

  it('denies its own partition in any other table', async () => {
    const own = arnOf('i-0123456789abcdef0');
    const other = `arn:aws:dynamodb:${region}:${account}:table/another`;
    expect(await isAllowed(policy, nodeRequest('dynamodb:GetItem', other, own, [own]))).toBe(false);
    expect(await isAllowed(policy, nodeRequest('dynamodb:GetItem', TABLE_ARN, own, [own]))).toBe(true);
  });
});

describe('Policy: Lambda roles (EC2 scoped by tags)', () => {
  let lifecycle: PolicyJson;
  let reconciler: PolicyJson;
  const eni = ec2Arn('network-interface', 'eni-0123456789abcdef0');
  const tagged = (cluster: string | undefined): Request['context'] => ({
    [`ec2:ResourceTag/${CLUSTER_TAG_KEY}`]: cluster,
    'aws:RequestedRegion': region,
  });

  beforeAll(() => {
    const hasAction = (action: string) => (props: Record<string, unknown>) =>
      JSON.stringify(props.PolicyDocument).includes(`"${action}"`);
    lifecycle = policyOf(template, 'AWS::IAM::Policy', hasAction('autoscaling:CompleteLifecycleAction'));
    reconciler = policyOf(
      template,
      'AWS::IAM::Policy',
      (p) => hasAction('ec2:DeleteTags')(p) && !hasAction('ec2:CreateNetworkInterface')(p),
    );
  });

  it('creates ENIs only when they are tagged for this cluster at creation', async () => {
    const create = (cluster: string | undefined): Request => ({
      action: 'ec2:CreateNetworkInterface',
      resource: ec2Arn('network-interface', '*'),
      context: { [`aws:RequestTag/${CLUSTER_TAG_KEY}`]: cluster },
    });
    expect(await isAllowed(lifecycle, create('prod-1'))).toBe(true);
    expect(await isAllowed(lifecycle, create('prod-2'))).toBe(false);
    expect(await isAllowed(lifecycle, create(undefined))).toBe(false);
    const tagOnCreate = (createAction: string): Request => ({
      action: 'ec2:CreateTags',
      resource: eni,
      context: { 'ec2:CreateAction': createAction },
    });
    expect(await isAllowed(lifecycle, tagOnCreate('CreateNetworkInterface'))).toBe(true);
    expect(await isAllowed(lifecycle, tagOnCreate(''))).toBe(false);
  });

  it('creates ENIs only in subnets and security groups of the cluster VPC', async () => {
    const inVpc = (kind: string, vpcId: string): Request => ({
      action: 'ec2:CreateNetworkInterface',
      resource: ec2Arn(kind, `${kind === 'subnet' ? 'subnet' : 'sg'}-0123456789abcdef0`),
      context: { 'ec2:Vpc': ec2Arn('vpc', vpcId) },
    });
    for (const kind of ['subnet', 'security-group']) {
      expect(await isAllowed(lifecycle, inVpc(kind, TEST_VPC_ID))).toBe(true);
      expect(await isAllowed(lifecycle, inVpc(kind, 'vpc-0fffffffffffffff0'))).toBe(false);
    }
  });

  it('attaches, assigns, unassigns and deletes only ENIs carrying this cluster’s tag', async () => {
    for (const action of [
      'ec2:AttachNetworkInterface',
      'ec2:AssignPrivateIpAddresses',
      'ec2:UnassignPrivateIpAddresses',
      'ec2:AssignIpv6Addresses',
      'ec2:UnassignIpv6Addresses',
      'ec2:ModifyNetworkInterfaceAttribute',
      'ec2:DeleteNetworkInterface',
    ]) {
      expect(await isAllowed(lifecycle, { action, resource: eni, context: tagged('prod-1') })).toBe(true);
      expect(await isAllowed(lifecycle, { action, resource: eni, context: tagged('prod-2') })).toBe(false);
      expect(await isAllowed(lifecycle, { action, resource: eni, context: tagged(undefined) })).toBe(false);
    }
  });

  it('attaches only to instances of the attached Auto Scaling groups', async () => {
    const attach = (group: string | undefined): Request => ({
      action: 'ec2:AttachNetworkInterface',
      resource: ec2Arn('instance', 'i-0123456789abcdef0'),
      context: { 'ec2:ResourceTag/aws:autoscaling:groupName': group },
    });
    expect(await isAllowed(lifecycle, attach('nodes-b'))).toBe(true);
    expect(await isAllowed(lifecycle, attach('someone-elses'))).toBe(false);
    expect(await isAllowed(lifecycle, attach(undefined))).toBe(false);
  });

  it('completes lifecycle actions only of the attached groups', async () => {
    const complete = (group: string): Request => ({
      action: 'autoscaling:CompleteLifecycleAction',
      resource: `arn:aws:autoscaling:${region}:${account}:autoScalingGroup:1b2c3d4e-0000-4000-8000-000000000000:autoScalingGroupName/${group}`,
      context: {},
    });
    expect(await isAllowed(lifecycle, complete('nodes-a'))).toBe(true);
    expect(await isAllowed(lifecycle, complete('nodes-c'))).toBe(false);
  });

  it('describes only in its own Region and never runs or terminates instances', async () => {
    const describe = (r: string): Request => ({
      action: 'ec2:DescribeNetworkInterfaces',
      resource: '*',
      context: { 'aws:RequestedRegion': r },
    });
    expect(await isAllowed(lifecycle, describe(region))).toBe(true);
    expect(await isAllowed(lifecycle, describe('us-east-1'))).toBe(false);
    for (const action of ['ec2:RunInstances', 'ec2:TerminateInstances', 'ec2:DeleteSubnet'])
      expect(await isAllowed(lifecycle, { action, resource: '*', context: tagged('prod-1') })).toBe(false);
  });

  it('lets the reconciler delete and mark this cluster’s ENIs but never create one or touch the cluster tag', async () => {
    expect(
      await isAllowed(reconciler, { action: 'ec2:DeleteNetworkInterface', resource: eni, context: tagged('prod-1') }),
    ).toBe(true);
    expect(
      await isAllowed(reconciler, { action: 'ec2:DeleteNetworkInterface', resource: eni, context: tagged('other') }),
    ).toBe(false);
    const mark = (keys: string[]): Request => ({
      action: 'ec2:CreateTags',
      resource: eni,
      context: { ...tagged('prod-1'), 'aws:TagKeys': keys },
    });
    expect(await isAllowed(reconciler, mark([GC_MARK_TAG]))).toBe(true);
    expect(await isAllowed(reconciler, mark([CLUSTER_TAG_KEY]))).toBe(false);
    expect(
      await isAllowed(reconciler, {
        action: 'ec2:CreateNetworkInterface',
        resource: ec2Arn('network-interface', '*'),
        context: {},
      }),
    ).toBe(false);
  });
});

describe('Policy: Lambda roles with hooklessLaunches (attach to cluster-tagged instances)', () => {
  /** Every synthesised role policy that may attach ENIs (lifecycle and pool-manager). */
  function attachPolicies(t: Template): PolicyJson[] {
    const docOf = (p: Record<string, unknown>): string => JSON.stringify(p.PolicyDocument);
    const docs = Object.values(t.findResources('AWS::IAM::Policy'))
      .map((r) => docOf(r.Properties))
      .filter((d) => d.includes('"ec2:AttachNetworkInterface"'));
    expect(docs).toHaveLength(2);
    return docs.map((d) => policyOf(t, 'AWS::IAM::Policy', (p) => docOf(p) === d));
  }
  const attach = (tags: Record<string, string>): Request => ({
    action: 'ec2:AttachNetworkInterface',
    resource: ec2Arn('instance', 'i-0123456789abcdef0'),
    context: Object.fromEntries(Object.entries(tags).map(([k, v]) => [`ec2:ResourceTag/${k}`, v])),
  });

  it('attaches to instances with the cluster tag (any value) or of the groups, and to no other instance', async () => {
    const t = synthAllocator({ hooklessLaunches: true }).template;
    for (const policy of attachPolicies(t)) {
      expect(await isAllowed(policy, attach({ 'kubernetes.io/cluster/prod-1': 'owned' }))).toBe(true);
      expect(await isAllowed(policy, attach({ 'kubernetes.io/cluster/prod-1': 'shared' }))).toBe(true);
      expect(await isAllowed(policy, attach({ 'aws:autoscaling:groupName': 'nodes-a' }))).toBe(true);
      // Negative controls: another cluster's tag, an unrelated tag, no tag.
      expect(await isAllowed(policy, attach({ 'kubernetes.io/cluster/prod-2': 'owned' }))).toBe(false);
      expect(await isAllowed(policy, attach({ Name: 'prod-1' }))).toBe(false);
      expect(await isAllowed(policy, attach({}))).toBe(false);
    }
  });

  it('without groups, attaches only to instances carrying a configured tag key', async () => {
    const t = synthAllocator({
      autoScalingGroups: [],
      hooklessLaunches: true,
      clusterTagKey: 'karpenter.sh/nodepool',
    }).template;
    for (const policy of attachPolicies(t)) {
      expect(await isAllowed(policy, attach({ 'karpenter.sh/nodepool': 'default' }))).toBe(true);
      expect(await isAllowed(policy, attach({ 'kubernetes.io/cluster/prod-1': 'owned' }))).toBe(false);
      expect(await isAllowed(policy, attach({}))).toBe(false);
    }
  });
});
