#!/usr/bin/env node
// The `vpc-lease` executable (package.json "bin"): loads the TypeScript CLI through tsx's ESM loader, so the
// CLI runs the same shared/ sources as the Lambdas and tests, with no build step.
import { register } from 'tsx/esm/api';

register();
await import('./entry.ts');
