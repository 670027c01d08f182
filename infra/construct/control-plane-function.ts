import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as nodejs from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { LAMBDA_BUNDLE } from '../lambda-bundle.js';

/** The project root: where `lambdas/` and package-lock.json live (two levels above this file). */
export const PROJECT_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The newest GA Node.js runtime aws-cdk-lib offers; the bundle targets it too. */
export const FUNCTION_RUNTIME = lambda.Runtime.NODEJS_24_X;

export type HandlerName = 'instance-lifecycle' | 'pool-manager' | 'reconciler';

export interface ControlPlaneFunctionProps {
  readonly handler: HandlerName;
  readonly description: string;
  readonly timeout: Duration;
  readonly memorySizeMb: number;
  readonly environment: Readonly<Record<string, string>>;
  readonly logRetention: logs.RetentionDays;
  readonly logRemovalPolicy: RemovalPolicy;
}

/**
 * One Lambda of the control plane: its own role (no AWS managed policy; logs only to its own group), its own
 * log group with a retention, arm64, X-Ray, and an ESM bundle built by the local esbuild — never Docker.
 */
export class ControlPlaneFunction extends Construct {
  readonly fn: nodejs.NodejsFunction;
  readonly role: iam.Role;
  readonly logGroup: logs.LogGroup;

  constructor(scope: Construct, id: string, props: ControlPlaneFunctionProps) {
    super(scope, id);
    const entry = join(PROJECT_ROOT, 'lambdas', props.handler, 'handler.ts');
    if (!existsSync(entry)) throw new Error(`failed to find the ${props.handler} handler: no file ${entry}`);
    this.logGroup = new logs.LogGroup(this, 'Logs', {
      retention: props.logRetention,
      removalPolicy: props.logRemovalPolicy,
    });
    this.role = new iam.Role(this, 'Role', {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: `vpc-lease ${props.handler}`,
    });
    this.logGroup.grantWrite(this.role);
    this.fn = new nodejs.NodejsFunction(this, 'Function', {
      entry,
      handler: 'handler',
      description: props.description,
      projectRoot: PROJECT_ROOT,
      depsLockFilePath: join(PROJECT_ROOT, 'package-lock.json'),
      runtime: FUNCTION_RUNTIME,
      architecture: lambda.Architecture.ARM_64,
      memorySize: props.memorySizeMb,
      timeout: props.timeout,
      tracing: lambda.Tracing.ACTIVE,
      role: this.role,
      logGroup: this.logGroup,
      loggingFormat: lambda.LoggingFormat.JSON,
      environment: { ...props.environment, NODE_OPTIONS: '--enable-source-maps' },
      bundling: {
        forceDockerBundling: false,
        format: nodejs.OutputFormat.ESM,
        // Bundle the pinned SDK rather than the runtime's: the code runs against the version it was tested with.
        externalModules: [],
        target: LAMBDA_BUNDLE.target,
        mainFields: [...LAMBDA_BUNDLE.mainFields],
        minify: LAMBDA_BUNDLE.minify,
        keepNames: LAMBDA_BUNDLE.keepNames,
        sourceMap: true,
        sourceMapMode: nodejs.SourceMapMode.DEFAULT,
        sourcesContent: LAMBDA_BUNDLE.sourcesContent,
        banner: LAMBDA_BUNDLE.banner,
        esbuildArgs: Object.fromEntries(
          Object.entries(LAMBDA_BUNDLE.alias).map(([from, to]) => [`--alias:${from}`, to]),
        ),
      },
    });
  }
}
