import { App } from 'aws-cdk-lib';
import { Capture, Match, Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { hookNames } from '../../infra/construct/lifecycle-events.js';
import { VpcLeaseStack } from '../../infra/construct/stack.js';
import { VpcLeaseTrialStack } from '../../infra/example/trial-stack.js';
import { TEST_ENV } from './support/stacks.js';

describe('Stack: VpcLeaseTrialStack', () => {
  let template: Template;

  beforeAll(() => {
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    template = Template.fromStack(new VpcLeaseTrialStack(app, 'Trial', { env: TEST_ENV }));
  });

  it('gives the VPC a DynamoDB gateway endpoint, which the node policy’s aws:SourceVpc needs', () => {
    template.hasResourceProperties('AWS::EC2::VPCEndpoint', {
      VpcEndpointType: 'Gateway',
      ServiceName: Match.objectLike({ 'Fn::Join': ['', Match.arrayWith([Match.stringLikeRegexp('dynamodb')])] }),
    });
  });

  it('starts the group empty so that every node launches through the hooks', () => {
    template.hasResourceProperties('AWS::AutoScaling::AutoScalingGroup', { MinSize: '0', MaxSize: '3' });
    const asg = Object.values(template.findResources('AWS::AutoScaling::AutoScalingGroup'))[0];
    expect(asg?.Properties.DesiredCapacity).toBeUndefined();
    const groupRef = new Capture();
    template.hasResourceProperties('AWS::AutoScaling::LifecycleHook', {
      AutoScalingGroupName: groupRef,
      LifecycleHookName: hookNames('vpc-lease-trial').launch,
    });
    expect(groupRef.asObject()).toEqual({ Ref: expect.stringMatching(/^Nodes/) });
  });

  it('attaches the node policy to the nodes’ role and requires IMDSv2', () => {
    template.hasResourceProperties('AWS::IAM::ManagedPolicy', {
      Roles: [{ Ref: Match.stringLikeRegexp('^NodeRole') }],
      PolicyDocument: {
        Statement: [
          Match.objectLike({ Sid: 'ReadOwnPartition' }),
          Match.objectLike({ Sid: 'ClaimAndReleaseOwnLeases' }),
        ],
      },
    });
    template.hasResourceProperties('AWS::EC2::LaunchTemplate', {
      LaunchTemplateData: Match.objectLike({ MetadataOptions: Match.objectLike({ HttpTokens: 'required' }) }),
    });
  });
});

describe('Stack: VpcLeaseStack', () => {
  it('takes the VPC as a deploy-time parameter when none is given, and outputs what operators need', () => {
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const template = Template.fromStack(new VpcLeaseStack(app, 'App', { env: TEST_ENV, allocator: {} }));
    template.hasParameter('VpcId', { Type: 'AWS::EC2::VPC::Id' });
    template.hasResourceProperties('AWS::IAM::ManagedPolicy', {
      PolicyDocument: {
        // Both statements, the read and the claim/release one, only from the cluster's VPC.
        Statement: [0, 1].map(() =>
          Match.objectLike({ Condition: Match.objectLike({ StringEquals: { 'aws:SourceVpc': { Ref: 'VpcId' } } }) }),
        ),
      },
    });
    for (const name of ['TableName', 'NodePolicyArn', 'QueueUrl', 'DeadLetterQueueUrl', 'DashboardName'])
      template.hasOutput(name, Match.anyValue());
  });

  it('outputs the node image the trial is given, for npm run daemonset', () => {
    const uri = `123456789012.dkr.ecr.eu-west-1.amazonaws.com/vpc-lease-cni@sha256:${'f'.repeat(64)}`;
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const trial = Template.fromStack(new VpcLeaseTrialStack(app, 'TrialImage', { env: TEST_ENV, nodeImageUri: uri }));
    trial.hasOutput('NodeImageUri', { Value: uri });
    const other = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const plain = Template.fromStack(new VpcLeaseTrialStack(other, 'TrialPlain', { env: TEST_ENV }));
    expect(plain.findOutputs('NodeImageUri')).toEqual({});
  });
});
