import { App, Stack, Validations } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as iam from 'aws-cdk-lib/aws-iam';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { IConstruct } from 'constructs';
import { beforeAll, describe, expect, it } from 'vitest';
import { VpcLeaseStack } from '../../infra/construct/stack.js';
import { VpcLeaseTrialStack } from '../../infra/example/trial-stack.js';
import { buildAllocator, synthAllocator, TEST_ENV } from './support/stacks.js';

interface Violation {
  readonly ruleName: string;
  readonly severity?: string;
  readonly violatingResources: readonly { readonly constructPath: string }[];
}

/** Synthesises (so aspects have run) and returns cdk-nag's unacknowledged errors, one line each. */
function nagErrors(stack: Stack): string[] {
  Template.fromStack(stack);
  const report = new AwsSolutionsChecks().validateScope(stack) as unknown as { violations: Violation[] };
  return report.violations
    .filter((v) => v.severity === 'error')
    .flatMap((v) => v.violatingResources.map((r) => `${v.ruleName} at ${r.constructPath}`));
}

/** Every acknowledgement recorded under a scope, with its reason. */
function acknowledgements(scope: IConstruct): { id: string; reason: string }[] {
  return scope.node.findAll().flatMap((c) =>
    c.node.metadata
      .filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY)
      .flatMap((m) =>
        Object.entries(m.data as Record<string, { reason?: string } | string>).map(([id, v]) => ({
          id,
          reason: typeof v === 'string' ? v : (v.reason ?? ''),
        })),
      ),
  );
}

describe('cdk-nag: AwsSolutions', () => {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
  let allocatorStack: Stack;
  let appStack: VpcLeaseStack;
  let trial: VpcLeaseTrialStack;

  beforeAll(() => {
    ({ stack: allocatorStack } = synthAllocator());
    appStack = new VpcLeaseStack(app, 'App', { env: TEST_ENV, allocator: { autoScalingGroups: ['nodes'] } });
    trial = new VpcLeaseTrialStack(app, 'Trial', { env: TEST_ENV });
  });

  it('finds no unacknowledged error in the allocator', () => {
    expect(nagErrors(allocatorStack)).toEqual([]);
  });

  it('finds no unacknowledged error with hookless launches and no group', () => {
    const { stack } = synthAllocator({ autoScalingGroups: [], hooklessLaunches: true });
    expect(nagErrors(stack)).toEqual([]);
  });

  it('finds no unacknowledged error in the app stack (VPC as a parameter)', () => {
    expect(nagErrors(appStack)).toEqual([]);
  });

  it('finds no unacknowledged error in the trial stack (VPC, group and allocator)', () => {
    expect(nagErrors(trial)).toEqual([]);
  });

  it('justifies every acknowledgement with a reason', () => {
    const acks = [...acknowledgements(allocatorStack), ...acknowledgements(trial)];
    expect(acks.length).toBeGreaterThan(0);
    for (const ack of acks) expect(ack.reason.length, ack.id).toBeGreaterThan(40);
  });

  it('still reports a wildcard nobody gave a reason for (acknowledgements are not blanket)', () => {
    // Prepare: before synthesis, a statement on a kind of resource the construct never grants.
    const allocator = buildAllocator({ clusterName: 'prod-1', autoScalingGroups: ['nodes'] });
    (allocator.lifecycleFunction.role as iam.Role).addToPrincipalPolicy(
      new iam.PolicyStatement({ actions: ['ec2:DeleteVolume'], resources: ['arn:aws:ec2:*:*:volume/*'] }),
    );
    // Act
    const errors = nagErrors(Stack.of(allocator));
    // Assess: exactly that finding, nothing else.
    expect(errors).toEqual([expect.stringMatching(/^AwsSolutions-IAM5\[Resource::arn:aws:ec2:\*:\*:volume\/\*\] at /)]);
  });
});
