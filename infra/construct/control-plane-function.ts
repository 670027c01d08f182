import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AssetHashType, DockerImage, type Duration, type RemovalPolicy } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';

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
  readonly fn: lambda.Function;
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
    this.fn = new lambda.Function(this, 'Function', {
      code: bundledCode(props.handler),
      handler: 'index.handler',
      description: props.description,
      runtime: FUNCTION_RUNTIME,
      architecture: lambda.Architecture.ARM_64,
      memorySize: props.memorySizeMb,
      timeout: props.timeout,
      tracing: lambda.Tracing.ACTIVE,
      role: this.role,
      logGroup: this.logGroup,
      loggingFormat: lambda.LoggingFormat.JSON,
      environment: { ...props.environment, NODE_OPTIONS: '--enable-source-maps' },
    });
  }
}

const HANDLERS: readonly HandlerName[] = ['instance-lifecycle', 'pool-manager', 'reconciler'];

/** Every handler's bundle, made once per synthesis: one child process (Node + tsx + esbuild) instead of three. */
let bundlesDir: string | undefined;

function bundles(): string {
  if (bundlesDir === undefined) {
    const dir = mkdtempSync(join(tmpdir(), 'vpc-lease-lambdas-'));
    // CDK copies each bundle into its asset directory; the scratch copies go with the process.
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
    const script = join(PROJECT_ROOT, 'packaging', 'bundle-lambda.ts');
    execFileSync(process.execPath, ['--import', 'tsx', script, dir, ...HANDLERS], {
      cwd: PROJECT_ROOT,
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    bundlesDir = dir;
  }
  return bundlesDir;
}

/**
 * The handler's bundle, made by packaging/bundle-lambda.ts with the options `npm run build` uses (the SDK plugin
 * of packaging/lambda-bundle.ts included, which NodejsFunction's esbuild command line cannot take). The pinned SDK
 * is bundled rather than the runtime's: the code runs against the version it was tested with.
 */
function bundledCode(handler: HandlerName): lambda.Code {
  return lambda.Code.fromAsset(join(PROJECT_ROOT, 'lambdas', handler), {
    assetHashType: AssetHashType.OUTPUT,
    bundling: {
      // Never pulled: local bundling always answers, so Docker is not needed.
      image: DockerImage.fromRegistry('public.ecr.aws/sam/build-nodejs24.x'),
      local: {
        tryBundle(outputDir: string): boolean {
          cpSync(join(bundles(), handler), outputDir, { recursive: true });
          return true;
        },
      },
    },
  });
}
