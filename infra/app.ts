/**
 * The CDK app (`cdk.json` runs it): one vpc-lease stack configured from context, plus the trial stack with
 * `-c example=true`. Synthesises offline: no lookups, the VPC id is a deploy-time parameter unless given.
 * cdk-nag's AwsSolutions pack runs on every synth; an unsuppressed error fails it.
 */
import { App, Validations } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import { AwsSolutionsChecks } from 'cdk-nag';
import { appSettingsFromContext } from './construct/app-context.js';
import { VpcLeaseStack } from './construct/stack.js';
import { VpcLeaseTrialStack } from './example/trial-stack.js';

const app = new App();
const settings = appSettingsFromContext((key) => app.node.tryGetContext(key));
const env = { account: process.env.CDK_DEFAULT_ACCOUNT, region: process.env.CDK_DEFAULT_REGION };

const stack = new VpcLeaseStack(app, settings.stackName, {
  env,
  description: 'vpc-lease: VPC addresses for Kubernetes pods on extra ENIs, allocated off the nodes',
  allocator: { ...settings.allocator },
});
settings.nodeRoleNames.forEach((name, i) => {
  stack.allocator.nodePolicy.attachToRole(iam.Role.fromRoleName(stack, `NodeRole${i}`, name));
});
if (settings.example)
  new VpcLeaseTrialStack(app, `${settings.stackName}Trial`, { env, nodeImageUri: settings.allocator.nodeImageUri });

Validations.of(app).addPlugins(new AwsSolutionsChecks(app, { verbose: true }));
app.synth();
