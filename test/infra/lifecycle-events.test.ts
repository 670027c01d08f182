import { Annotations, Match } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { controlPlaneConfigFromEnv } from '../../shared/config/control-plane.js';
import { buildAllocator, synthAllocator } from './support/stacks.js';

const LAUNCH_STATES = {
  EventPattern: {
    source: ['aws.ec2'],
    'detail-type': ['EC2 Instance State-change Notification'],
    detail: { state: ['pending', 'running'] },
  },
};

function lifecycleEnv(template: ReturnType<typeof synthAllocator>['template']): Record<string, string> {
  const fns = Object.values(template.findResources('AWS::Lambda::Function')).filter((r) =>
    String(r.Properties.Description).includes('launch and terminate'),
  );
  expect(fns).toHaveLength(1);
  const vars = fns[0]!.Properties.Environment.Variables as Record<string, unknown>;
  // Tokens (the table's name) resolve at deploy time; only the literals matter here.
  return Object.fromEntries(
    Object.entries(vars).map(([k, v]) => [k, typeof v === 'string' ? v : 'resolved-at-deploy']),
  );
}

describe('Construct: LifecycleEvents with hooklessLaunches', () => {
  it('routes EC2 pending and running state changes into the lifecycle queue, beside the hooks', () => {
    const { template } = synthAllocator({ hooklessLaunches: true });
    template.hasResourceProperties('AWS::Events::Rule', {
      ...LAUNCH_STATES,
      Targets: [
        Match.objectLike({
          Arn: { 'Fn::GetAtt': [Match.stringLikeRegexp('QueueEvents'), 'Arn'] },
          DeadLetterConfig: Match.anyValue(),
        }),
      ],
    });
    // The hooks and the terminated rule stay as they are.
    template.resourceCountIs('AWS::AutoScaling::LifecycleHook', 4);
    template.resourcePropertiesCountIs(
      'AWS::Events::Rule',
      { EventPattern: { source: ['aws.ec2'], detail: { state: ['terminated'] } } },
      1,
    );
  });

  it('adds no state-change launch rule by default (negative control)', () => {
    const { template } = synthAllocator();
    template.resourcePropertiesCountIs('AWS::Events::Rule', LAUNCH_STATES, 0);
    expect(controlPlaneConfigFromEnv(lifecycleEnv(template)).clusterTagKey).toBeUndefined();
  });

  it('gives the Lambdas the configured cluster tag key', () => {
    const { template } = synthAllocator({ hooklessLaunches: true, clusterTagKey: 'karpenter.sh/nodepool' });
    expect(controlPlaneConfigFromEnv(lifecycleEnv(template)).clusterTagKey).toBe('karpenter.sh/nodepool');
  });

  it('warns about a cluster without groups only when it has no hook-less launches either', () => {
    const hookless = synthAllocator({ autoScalingGroups: [], hooklessLaunches: true });
    hookless.template.resourceCountIs('AWS::AutoScaling::LifecycleHook', 0);
    hookless.template.resourcePropertiesCountIs('AWS::Events::Rule', LAUNCH_STATES, 1);
    Annotations.fromStack(hookless.stack).hasNoWarning('*', Match.stringLikeRegexp('no autoScalingGroups'));
    const neither = synthAllocator({ autoScalingGroups: [] });
    Annotations.fromStack(neither.stack).hasWarning('*', Match.stringLikeRegexp('no autoScalingGroups'));
  });

  it.each([
    [{ clusterTagKey: 'karpenter.sh/nodepool' }, /clusterTagKey: only hooklessLaunches uses it/],
    [{ hooklessLaunches: true, clusterTagKey: 'aws:ec2launchtemplate:id' }, /clusterTagKey: .* is not an EC2 tag key/],
  ])('refuses bad props %j', (props, message) => {
    expect(() => buildAllocator(props)).toThrow(message);
  });
});
