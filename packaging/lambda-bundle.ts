import type { BuildOptions } from 'esbuild';
import { sdkSchemaKeys } from './sdk-schema-keys.js';

/**
 * How every Lambda bundle is made, by `npm run build` (dist/lambdas) and by the CDK construct alike (through
 * packaging/bundle-lambda.ts), so the bundle measured is the bundle deployed.
 */
export const LAMBDA_BUNDLE = {
  /** The construct's runtime (FUNCTION_RUNTIME): no syntax lowered for older Node. */
  target: 'node24',
  format: 'esm',
  // The SDK's ES modules: esbuild can drop the commands (and their schemas) we never send; its CommonJS
  // build is one module per client that keeps every one of them.
  mainFields: ['module', 'main'],
  minify: true,
  // Our errors name themselves after their class (`new.target.name`): logs must say LeaseConflictError, not `e`.
  keepNames: true,
  // The map stays beside the bundle for stack traces; without the sources' text it is a fraction of the size
  // that --enable-source-maps reads at every cold start.
  sourcemap: 'linked',
  sourcesContent: false,
  legalComments: 'none',
  // Relative to the project root, where both `npm run build` and the CDK construct run esbuild.
  alias: { '@aws-sdk/credential-provider-node': './lambdas/env-credential-provider.ts' },
  // Some bundled CommonJS dependencies call require() for Node built-ins, which ESM output lacks.
  banner:
    "import { createRequire as __vpcLeaseRequire } from 'node:module'; const require = __vpcLeaseRequire(import.meta.url);",
} as const satisfies Omit<BuildOptions, 'banner'> & { banner: string };

/** esbuild's options for one handler's bundle. */
export function lambdaBuildOptions(entry: string, outfile: string): BuildOptions {
  const { banner, ...rest } = LAMBDA_BUNDLE;
  return {
    ...rest,
    mainFields: [...rest.mainFields],
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: 'node',
    banner: { js: banner },
    plugins: [sdkSchemaKeys],
  };
}
