/**
 * `tsx infra/bundle-lambda.ts <handler> <outdir>`: one Lambda bundle (index.mjs and its map) made with
 * infra/lambda-bundle.ts. The CDK construct runs it as a child process because asset bundling is synchronous
 * and esbuild plugins run only in its asynchronous API.
 */
import { join } from 'node:path';
import { build } from 'esbuild';
import { lambdaBuildOptions } from './lambda-bundle.js';

const [handler, outDir] = process.argv.slice(2);
if (!handler || !/^[a-z][a-z-]*$/.test(handler) || !outDir) {
  console.error('usage: bundle-lambda.ts <handler> <outdir>');
  process.exit(2);
}
const root = join(import.meta.dirname, '..');
await build({
  ...lambdaBuildOptions(join(root, 'lambdas', handler, 'handler.ts'), join(outDir, 'index.mjs')),
  absWorkingDir: root,
  logLevel: 'warning',
});
