/** The process entry of `vpc-lease` (through vpc-lease.mjs): runs the CLI and exits with its code. */
import { runCli } from './cli.js';

// package.json's engines allow Node 20; the SDK's warning concerns SDK releases newer than the pinned one.
process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] ??= 'true';

const code = await runCli(process.argv.slice(2), {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
  env: process.env,
});
process.exitCode = code;
