import { App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { VpcLeaseAllocator } from '../../../infra/construct/allocator.js';
import type { VpcLeaseAllocatorProps } from '../../../infra/construct/props.js';

export const TEST_ENV = { account: '123456789012', region: 'eu-west-1' } as const;
export const TEST_VPC_ID = 'vpc-0123456789abcdef0';

export interface SynthesisedAllocator {
  readonly app: App;
  readonly stack: Stack;
  readonly allocator: VpcLeaseAllocator;
  readonly template: Template;
}

/**
 * One allocator in a fresh stack. Bundling is skipped (`aws:cdk:bundling-stacks: []`) unless asked for: the
 * template is the same, and the real esbuild run is covered once by the `cdk synth` test.
 */
export function synthAllocator(
  props: Partial<VpcLeaseAllocatorProps> = {},
  options: { readonly bundle?: boolean } = {},
): SynthesisedAllocator {
  const app = new App(options.bundle ? {} : { context: { 'aws:cdk:bundling-stacks': [] } });
  const stack = new Stack(app, 'Test', { env: TEST_ENV });
  const allocator = new VpcLeaseAllocator(stack, 'Allocator', {
    clusterName: 'prod-1',
    vpc: TEST_VPC_ID,
    autoScalingGroups: ['nodes-a', 'nodes-b'],
    ...props,
  });
  return { app, stack, allocator, template: Template.fromStack(stack) };
}

/** Builds an allocator without synthesising (for props that must throw in the constructor). */
export function buildAllocator(props: Partial<VpcLeaseAllocatorProps>): VpcLeaseAllocator {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
  const stack = new Stack(app, 'Test', { env: TEST_ENV });
  return new VpcLeaseAllocator(stack, 'Allocator', { vpc: TEST_VPC_ID, ...props });
}

/** The logical id of the only resource of a type: found, never hard-coded (they are hashes). */
export function onlyLogicalId(template: Template, type: string): string {
  const ids = Object.keys(template.findResources(type));
  if (ids.length !== 1) throw new Error(`expected one ${type}, found ${ids.length}`);
  return ids[0]!;
}
