/** `npm run fabric [-- --only l2/boot,l3/pod] [--verbose]`: the VPC fabric matrix in the VM, printed as a table. */
import { formatMatrix, formatRun, runFabric, unsupportedReason } from './harness.js';

const args = process.argv.slice(2);
const onlyAt = args.indexOf('--only');
const run = await runFabric({
  verbose: args.includes('--verbose'),
  ...(onlyAt >= 0 && args[onlyAt + 1] ? { only: args[onlyAt + 1] } : {}),
});
console.log(`${formatMatrix(run.results)}\n${formatRun(run)}`);
const unexpected = run.results.filter((r) => !r.ok && !unsupportedReason(r));
console.log(
  `\n${run.results.length} cells, ${unexpected.length} unexpected FAIL, VM exit ${run.exitCode}, ${Math.round(run.wallMs / 1000)} s`,
);
if (run.results.length === 0) console.log(run.consoleTail);
process.exit(unexpected.length > 0 || run.results.length === 0 ? 1 : 0);
