/**
 * `tsx packaging/bundle-lambda.ts <outdir> <handler>...`: each handler's Lambda bundle (`<outdir>/<handler>/index.mjs`
 * and its map), made with packaging/lambda-bundle.ts. The CDK construct runs it as a child process because asset
 * bundling is synchronous and esbuild plugins run only in its asynchronous API.
 */
import { join } from 'node:path';
import { build } from 'esbuild';
import { lambdaBuildOptions } from './lambda-bundle.js';

const [outDir, ...handlers] = process.argv.slice(2);
if (!outDir || handlers.length === 0 || !handlers.every((h) => /^[a-z][a-z-]*$/.test(h))) {
  console.error('usage: bundle-lambda.ts <outdir> <handler>...');
  process.exit(2);
}
const root = join(import.meta.dirname, '..');
await Promise.all(
  handlers.map((handler) =>
    build({
      ...lambdaBuildOptions(join(root, 'lambdas', handler, 'handler.ts'), join(outDir, handler, 'index.mjs')),
      absWorkingDir: root,
      logLevel: 'warning',
    }),
  ),
);
