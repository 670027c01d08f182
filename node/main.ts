import { runCli } from './cli.js';

// One dispatch line; exit explicitly so a kept-alive socket can never hold the runtime waiting.
runCli(process.argv.slice(2), process.env).then((code) => process.exit(code));
